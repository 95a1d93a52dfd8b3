# frozen_string_literal: true

require "json"
require "optparse"
require "fileutils"
require "rbconfig"
require_relative "stats"

module Bench
  ROOT = File.expand_path("../..", __dir__)
  OUT_DIR = File.join(ROOT, "tmp", "bench")
  RUBY = RbConfig.ruby

  # A variant to time: a name, an environment, an argv, an optional untimed `prepare`
  # lambda run right before every timed run (wiping a cache dir, touching a tree…), and the
  # directory it runs in (nil: this process's).
  Variant = Struct.new(:name, :env, :argv, :prepare, :chdir, keyword_init: true)

  module Runner
    module_function

    # Wall time of one fresh process, in seconds: CLOCK_MONOTONIC around spawn + wait.
    # stdout goes to /dev/null; stderr is kept and shown if the process fails.
    def time_once(env, argv, chdir: nil) = measure_once(env, argv, chdir: chdir)[:wall]

    # {wall:, cpu:} of one fresh process, in seconds: CPU is the user + system time of the child
    # and what it waited for (Process.times' children fields around spawn + wait; the runs are
    # one at a time, so nothing else is counted).
    def measure_once(env, argv, chdir: nil)
      err = File.join(OUT_DIR, "last-stderr.#{Process.pid}")
      FileUtils.mkdir_p(OUT_DIR)
      c0 = Process.times
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      pid = Process.spawn(env, *argv, out: File::NULL, err: err, **(chdir ? { chdir: chdir } : {}))
      _, status = Process.wait2(pid)
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      c1 = Process.times
      unless status.success?
        raise "failed (#{status.inspect}): #{argv.join(" ")}\n#{File.read(err)[0, 4000]}"
      end

      msg = File.read(err)
      warn_once(msg) unless msg.empty?
      { wall: t, cpu: c1.cutime - c0.cutime + c1.cstime - c0.cstime }
    ensure
      File.delete(err) if err && File.exist?(err)
    end

    def warn_once(msg)
      @warned ||= {}
      return if @warned[msg]

      @warned[msg] = true
      warn "  (stderr) #{msg.lines.first(3).join.strip}"
    end

    # Runs every variant `runs` times, alternating: round r runs the variants in the order
    # rotated by r (A B C, B C A, C A B, …) so drift and order effects spread evenly.
    # `warmup` untimed rounds first (page cache, caches filled). Returns {name => [seconds]} of
    # `clock` (:wall or :cpu, measure_once).
    def alternate(variants, runs:, warmup: 1, progress: nil, clock: :wall)
      times = variants.to_h { |v| [v.name, []] }
      (warmup + runs).times do |r|
        variants.rotate(r % variants.size).each do |v|
          v.prepare&.call
          t = measure_once(v.env || {}, v.argv, chdir: v.chdir).fetch(clock)
          times[v.name] << t if r >= warmup
        end
        progress&.call(r - warmup + 1, runs) if r >= warmup
      end
      times
    end

    # What was measured: the commit, whether the work tree was dirty, the extension's mtime.
    def provenance
      # the newest build of the extension, wherever the build puts it (lib/loadscan/<minor>/…)
      lib = ENV["BENCH_LOADSCAN_LIB"].to_s.empty? ? File.join(ROOT, "lib") : ENV["BENCH_LOADSCAN_LIB"]
      so = Dir[File.join(lib, "loadscan", "**", "loadscan.{so,bundle}")].max_by { |f| File.mtime(f) }
      { commit: `git -C #{ROOT} rev-parse --short HEAD 2>/dev/null`.strip,
        dirty: !`git -C #{ROOT} status --porcelain -- lib ext 2>/dev/null`.strip.empty?,
        loadscan_so: so&.delete_prefix("#{ROOT}/"), loadscan_so_mtime: so ? File.mtime(so).utc.to_s : nil,
        loadscan_lib: ENV["BENCH_LOADSCAN_LIB"],
        ruby: RUBY_DESCRIPTION, at: Time.now.utc.to_s }
    end

    # A benchmark's options from ARGV: a copy of `defaults`, changed by the options the block
    # declares (`o.on`) under `banner`.
    #
    #   opts = Bench::Runner.parse("usage: ruby bench/scan.rb [--runs N]", { runs: 7 }) do |o, opts|
    #     o.on("--runs N", Integer) { |v| opts[:runs] = v }
    #   end
    def parse(banner, defaults, argv = ARGV)
      opts = defaults.dup
      OptionParser.new do |o|
        o.banner = banner
        yield o, opts
      end.parse!(argv)
      opts
    end

    # A benchmark's results: prints its table (`text`), writes `data` (which holds the table too)
    # as tmp/bench/NAME.json and prints its path.
    def publish(name, text, data)
      puts text
      puts "\nJSON: #{write_json(name, data)}"
    end

    def write_json(name, data)
      data = { provenance: provenance }.merge(data)
      FileUtils.mkdir_p(OUT_DIR)
      path = File.join(OUT_DIR, "#{name}.json")
      File.write(path, JSON.pretty_generate(data))
      path
    end

    # Plain-text table: header row + rows of cells (strings), columns left/right aligned.
    def table(header, rows)
      all = [header] + rows
      widths = header.each_index.map { |i| all.map { |r| r[i].to_s.size }.max }
      line = lambda do |r|
        r.each_with_index.map { |c, i| i.zero? ? c.to_s.ljust(widths[i]) : c.to_s.rjust(widths[i]) }.join("  ")
      end
      ([line.(header), widths.map { |w| "-" * w }.join("  ")] + rows.map(&line)).join("\n")
    end

    def fmt_ratio(r)
      return "-" unless r

      format("%.2f [%.2f–%.2f]", r[:ratio], r[:lo], r[:hi])
    end

    def ms(seconds) = format("%.1f", seconds * 1000)
  end
end
