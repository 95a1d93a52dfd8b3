# frozen_string_literal: true

require "json"
require "fileutils"
require "tmpdir"
require_relative "runner"
require_relative "fixtures"
require_relative "../../lib/loadscan/cli/gc_advice"

module Bench
  # Boots of one app with GC deferred during the boot (the default), with LOADSCAN_GC=off, and
  # each with the RUBY_GC_* settings `loadscan doctor` names for it (Loadscan::GCAdvice), for
  # bench/gc.rb and the gate. A boot's figures are its CPU time (user + system), its peak RSS
  # (GNU time's maximum resident set size) and its GC runs, read from the last boot's record
  # it wrote beside its cache (Loadscan::BootGC's figures): runs before loadscan's setup, up to
  # the end of the boot, and over the whole process.
  module GCBoots
    TIME = "/usr/bin/time"
    # on: deferred for any program (a Rails app set up from config/boot.rb is by default; the
    # gems-N fixture, which never says it has booted, is not).
    MODES = { "off" => { "LOADSCAN_GC" => "off" }, "on" => { "LOADSCAN_GC" => "on" } }.freeze

    # A boot to measure: a name, its environment, argv and directory.
    Target = Struct.new(:name, :env, :argv, :chdir, keyword_init: true)

    module_function

    # The fixture's boot (bench/support/fixtures.rb: gems-N), loadscan through its prelude.
    def fixture(name)
      fx = Fixtures.ensure(name)
      env = Fixtures.gem_env(fx).merge("BOOT_PRELUDE" => Fixtures.prelude("loadscan"), "BENCH_BOOT_GC" => "1")
      Target.new(name: name, env: env, argv: [RUBY, fx[:boot]], chdir: nil)
    end

    # The Rails app (bench/support/rails_app.rb, Fixtures::RailsApp's Rails 7.2) as `loadscan
    # install` sets it up: loadscan and Bootsnap's compile cache (loadscan alone where this Ruby's
    # stack has no Bootsnap), `bin/rails runner nil` in development; nil where this Ruby has no
    # Rails stack (then why is printed).
    def rails
      unless File.exist?(File.join(__dir__, "rails_app.rb"))
        warn "bench: no Rails app: bench/support/rails_app.rb (the Rails 8.1 fixture) is not in this checkout"
        return nil
      end
      require_relative "rails_app"
      if (why = RailsApp.missing)
        warn "bench: no Rails app: #{why}"
        return nil
      end
      RailsApp.ensure
      # loadscan with Bootsnap's compile cache where this Ruby's stack has Bootsnap (3.3), else alone.
      v = RailsApp.variants(only: [::Fixtures::RailsApp.bootsnap? ? "loadscan+compile_cache" : "loadscan"]).first
      Target.new(name: "rails", env: v.env.reject { |k, _| k == "LOADSCAN_CACHE_DIR" }, argv: v.argv, chdir: v.chdir)
    end

    # The variants of `target`: {name => env}: off, on, and each with doctor's settings (found
    # from a warm boot's record of that mode, and shown on stderr).
    def variants(target, cache_root)
      out = {}
      MODES.each do |mode, env|
        dir = File.join(cache_root, mode)
        FileUtils.mkdir_p(dir, mode: 0o700)
        out[mode] = env.merge("LOADSCAN_CACHE_DIR" => dir)
        2.times { measure(target, out[mode]) } # warm: cache, record, Bootsnap's compile cache
        settings = advice(target, out[mode])
        warn "bench: #{target.name}, #{mode}: doctor's settings #{settings.map { |k, v| "#{k}=#{v}" }.join(" ")}"
        out["#{mode}+settings"] = out[mode].merge(settings) unless settings.empty?
      end
      out
    end

    # Doctor's settings for the last boot recorded in env's cache dir, found with boots of a copy
    # of that cache (so the record the rounds use stays the mode's own).
    def advice(target, env)
      last = record(env["LOADSCAN_CACHE_DIR"])
      a = Loadscan::GCAdvice.new(last) do |extra|
        Dir.mktmpdir("bench-gc-probe") do |tmp|
          FileUtils.cp_r(Dir[File.join(env["LOADSCAN_CACHE_DIR"], "*")], tmp)
          { "gc" => measure(target, env.merge(extra).merge("LOADSCAN_CACHE_DIR" => tmp))[:gc] }
        end
      end.report
      a ? a["settings"] : {}
    end

    # One boot: {cpu:, rss_mb:, gc:} (the record's GC figures, String keys).
    def measure(target, env)
      out = File.join(OUT_DIR, "gc-time.#{Process.pid}")
      FileUtils.mkdir_p(OUT_DIR)
      last = File.join(env["LOADSCAN_CACHE_DIR"], "last_boot.json")
      before = File.exist?(last) && File.mtime(last)
      c0 = Process.times
      pid = Process.spawn(target.env.merge(env), TIME, "-f", "%M", "-o", out, *target.argv,
                          out: File::NULL, err: "#{out}.err", **(target.chdir ? { chdir: target.chdir } : {}))
      _, status = Process.wait2(pid)
      c1 = Process.times
      raise "#{target.name} failed (#{status.inspect}): #{target.argv.join(" ")}\n#{File.read("#{out}.err").lines.last(20).join}" unless status.success?

      raise "#{target.name}: the boot recorded nothing in #{last}" unless File.exist?(last) && File.mtime(last) != before

      gc = record(env["LOADSCAN_CACHE_DIR"]).fetch("gc")
      { cpu: c1.cutime - c0.cutime + c1.cstime - c0.cstime, rss_mb: File.read(out).to_i / 1024.0, gc: gc }
    end

    def record(dir)
      path = File.join(dir, "last_boot.json")
      File.exist?(path) ? JSON.parse(File.read(path)) : nil
    end

    # The gate's figures: the GC runs of one warm boot of the fixture `name` with GC deferred and
    # one with LOADSCAN_GC=off (Bench::GCBoots.runs), each after a boot that warmed its cache.
    def gate(name)
      target = fixture(name)
      Dir.mktmpdir("bench-gc-gate") do |tmp|
        MODES.to_h do |mode, env|
          env = env.merge("LOADSCAN_CACHE_DIR" => File.join(tmp, mode))
          measure(target, env)
          [mode, runs(measure(target, env)[:gc])]
        end
      end
    end

    # GC time (ms, GC.stat(:time)) of each boot in `list`: [before setup, from setup to the end of the boot].
    def gc_ms(list)
      list.map { |b| [b[:gc]["time_ms_before_setup"], b[:gc]["time_ms"] - b[:gc]["time_ms_before_setup"]] }
    end

    # GC runs of a boot: before setup, from setup to the end of the boot, from setup to exit.
    def runs(gc)
      after_setup = gc["runs"] - gc["runs_before_setup"]
      { before_setup: gc["runs_before_setup"], boot: after_setup, process: after_setup + gc["runs_after_boot"] }
    end
  end
end
