# frozen_string_literal: true

require "tmpdir"
require "etc"
require_relative "gc_advice"

module Loadscan
  # `loadscan doctor`: boots the app the way it boots (config/boot.rb when there is one, else
  # Bundler when there is a Gemfile) in a separate Ruby process, and reports whether `require`
  # reaches loadscan there, the versions involved, the settings in effect, the cache, and what
  # the boot's index answered. Each problem comes with the fix in words; any problem makes the
  # exit status 1. A boot that has not finished after `timeout` seconds is stopped and reported
  # as hanging.
  class Doctor
    # bench/ci.rb's measurement of what BOOTSNAP_REVALIDATE saves a fresh checkout's CI boot.
    CI_REVALIDATE_FIGURE = "with it, a fresh checkout's eager-loading boot of a Rails 7.2 app with 316 files of its own took " \
                           "0.80 of the CPU time it took without: bench/ci.rb, Bootsnap 1.26.1, Ruby 3.3.8"
    # Runs in the child: the app's own boot, as the parent chose it (`boot_file`, ARGV[2]; empty
    # for none), with loadscan/setup by the absolute path in ARGV[1] if the boot did not set it
    # up, then a report (Marshal, to the path in ARGV[0]).
    BOOT_SCRIPT = <<~'RUBY'
      report = { "boot" => (ARGV[2] unless ARGV[2].empty?) }
      begin
        case report["boot"]
        when "config/environment.rb" then require File.expand_path("config/environment.rb")
        when "config/boot.rb" then load File.expand_path("config/boot.rb")
        when "bundler/setup" then require "bundler/setup"
        end
      rescue Exception => e # rubocop:disable Lint/RescueException
        report["boot_error"] = "#{e.class}: #{e.message.lines.first.to_s.chomp}"
      end
      # Set up, or tried to (a setup that stayed off, as without the extension, still keeps its config).
      report["set_up_by_boot"] = defined?(Loadscan) && Loadscan.respond_to?(:active?) && (Loadscan.active? || !Loadscan.config.nil?)
      unless report["set_up_by_boot"]
        require ARGV.fetch(1) # loadscan/setup, by absolute path
      end
      report["ruby"] = RUBY_DESCRIPTION
      report["rubygems"] = defined?(Gem::VERSION) ? Gem::VERSION : nil
      report["bundler"] = defined?(Bundler::VERSION) ? Bundler::VERSION : nil
      report["active"] = Loadscan.active?
      report["native"] = Loadscan::Native.available? ? nil : Loadscan::Native.load_error.message
      # (Only then: why the source gem's install built no library.)
      report["native_not_built"] = Loadscan::Native.not_built if Loadscan::Native.respond_to?(:not_built) && Loadscan::Native.not_built
      report["engaged"] = Loadscan.engaged?
      report["require"] = Kernel.instance_method(:require).source_location&.join(":") || "a C function (Ruby's own or loadscan's)"
      if (config = Loadscan.config)
        report["settings"] = { "enabled" => config.enabled, "cache_dir" => config.cache_dir, "validate" => config.validate,
                               "readonly" => config.readonly, "lazy" => config.lazy, "threads" => config.threads }
        report["setting_problems"] = config.problems
      end
      report["stats"] = Loadscan.stats&.transform_keys(&:to_s)
      if defined?(Bootsnap::LoadPathCache) && Bootsnap::LoadPathCache.respond_to?(:enabled?) # Bootsnap loaded by the boot
        report["bootsnap_load_path_cache"] = Bootsnap::LoadPathCache.enabled? ? "on" : "off"
        report["bootsnap_turned_off_by_loadscan"] = Loadscan.respond_to?(:bootsnap) && Loadscan.bootsnap == :turned_off
      end
      if defined?(Bootsnap::VERSION) # its compile cache, and whether it revalidates (as Bootsnap reads BOOTSNAP_REVALIDATE)
        iseq = defined?(Bootsnap::CompileCache::ISeq) && Bootsnap::CompileCache::ISeq.respond_to?(:cache_dir) && Bootsnap::CompileCache::ISeq.cache_dir
        report["bootsnap"] = { "version" => Bootsnap::VERSION.to_s, "compile_cache" => iseq ? true : false,
                               "revalidate" => !["0", "false", nil].include?(ENV["BOOTSNAP_REVALIDATE"]) }
      end
      File.binwrite(ARGV.fetch(0), Marshal.dump(report))
    RUBY

    def initialize(cli_dirs: [], options: {}, env: ENV, timeout: CLI::DOCTOR_TIMEOUT)
      # The app's boot runs in the app's directory, found as the boot and the other commands
      # find it (Loadscan::App: the nearest one upward with a Gemfile or config/boot.rb).
      @app = App.nearest || Dir.pwd
      @dirs = cli_dirs
      @options = options
      @env = env
      @timeout = timeout
    end

    def report
      r = Output.utf8(trial_boot)
      r["cache"] = cache(r.dig("settings", "cache_dir"))
      r["last_boot"] = r.dig("settings", "cache_dir")&.then { |dir| LastBoot.read(dir) }
      r["gc_settings"] = GCAdvice.new(r["last_boot"]) { |env| Output.utf8(trial_boot(env))["stats"] }.report if r["ruby"]
      r["problems"] = problems(r)
      n = notes(r)
      r["notes"] = n unless n.empty?
      r["ok"] = r["problems"].empty?
      r
    end

    def self.text(report)
      # The boot hung or failed before it could say anything: only what went wrong.
      return ["boot: #{report["boot"] || "-"}", *report["problems"].map { |p| "PROBLEM: #{p}" }] unless report["ruby"]

      lines = ["ruby: #{report["ruby"]}", "rubygems: #{report["rubygems"] || "-"}, bundler: #{report["bundler"] || "-"}",
               "boot: #{report["boot"] || "none found (no config/boot.rb, no Gemfile)"}",
               "loadscan set up by the boot: #{report["set_up_by_boot"] ? "yes" : "no"}",
               "require reaches loadscan: #{report["engaged"] ? "yes" : "no"} (Kernel#require: #{report["require"]})"]
      if (s = report["stats"])
        lines << "index: #{s["load_path_entries"]} entries (#{s["roots_from_cache"]} from the cache), #{s["features"]} features"
      end
      if (c = report["cache"])
        lines << (c["exists"] ? "cache: #{c["path"]} (#{c["size"]} bytes, owner #{c["owner"]}, mode #{c["mode"]}, #{c["age_s"]} s old)" : "cache: none yet at #{c["path"]}")
      end
      if (bootsnap = report["bootsnap_load_path_cache"])
        why = ", turned off by loadscan/setup: loadscan answers require" if report["bootsnap_turned_off_by_loadscan"] && bootsnap == "off"
        lines << "Bootsnap's load-path cache: #{bootsnap}#{why}"
      end
      lines << "settings: #{report["settings"]&.map { |k, v| "#{k}=#{v}" }&.join(", ")}"
      lines << "last boot: #{report["last_boot"] ? LastBoot.describe(report["last_boot"]) : "none recorded yet"}"
      lines << "last boot's #{LastBoot.describe_gc(report["last_boot"]["gc"])}" if report.dig("last_boot", "gc")
      (cc = LastBoot.describe_compile_cache(report.dig("last_boot", "compile_cache"))) && lines << "last boot's #{cc}"
      lines.concat(GCAdvice.text(report["gc_settings"]))
      (report["notes"] || []).each { |n| lines << "note: #{n}" }
      if report["problems"].empty?
        lines << "ok"
      else
        report["problems"].each { |p| lines << "PROBLEM: #{p}" }
      end
      lines
    end

    private

    def trial_boot(extra_env = {})
      Dir.mktmpdir("loadscan-doctor") do |tmp|
        out = File.join(tmp, "report")
        env = extra_env.merge("LOADSCAN_READONLY" => "1") # looking, not writing
        env["LOADSCAN_CACHE_DIR"] = @options[:cache_dir] if @options[:cache_dir]
        args = @dirs.flat_map { |d| ["-I", d] }
        env = @env.to_h.merge(env)
        boot = boot_file(env)
        status, err = run_boot(env, RbConfig.ruby, *args, "-e", BOOT_SCRIPT, out, File.expand_path("../setup", __dir__), boot.to_s)
        return { "boot" => boot, "timed_out" => @timeout, "boot_output" => last_lines(err) } unless status
        unless status.success? && File.file?(out)
          how = status.exitstatus ? "exit #{status.exitstatus}" : "signal #{status.termsig}"
          return { "boot" => boot, "trial_error" => [how, last_lines(err)].reject(&:empty?).join(": ") }
        end

        Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad -- our own child wrote it
      end
    end

    # The last three lines of a child's stderr, on one line.
    def last_lines(err) = err.lines.last(3).map(&:strip).join(" | ")

    # What the trial boot runs with the child's `env` (decided here only; the child runs it): a Rails
    # app's whole boot when the GC advice asks for it (LOADSCAN_DOCTOR_ENVIRONMENT), else
    # config/boot.rb, else Bundler's setup for a Gemfile, else nothing (nil).
    def boot_file(env)
      if env["LOADSCAN_DOCTOR_ENVIRONMENT"] && File.file?(File.join(@app, "config/environment.rb")) then "config/environment.rb"
      elsif File.file?(File.join(@app, "config/boot.rb")) then "config/boot.rb"
      elsif env["BUNDLE_GEMFILE"] || File.file?(File.join(@app, "Gemfile")) then "bundler/setup"
      end
    end

    # Runs the boot in a process group of its own and returns its status (nil when it did not
    # exit within @timeout seconds) and stderr. Then the group is killed: the boot when it hangs,
    # and whatever it left running, which may hold stderr open for its whole life.
    def run_boot(env, *cmd)
      reader, writer = IO.pipe
      pid = Process.spawn(env, *cmd, in: File::NULL, out: File::NULL, err: writer, pgroup: true, chdir: @app)
      writer.close
      err = String.new
      draining = Thread.new { drain(reader, err) }
      waiter = Process.detach(pid)
      finished = waiter.join(@timeout)
      kill_group(pid)
      status = waiter.value
      draining.join(1) # EOF once the group is gone, unless a process of another group holds the pipe
      [finished && status, err]
    ensure
      reader&.close
      draining&.join
    end

    def kill_group(pgid)
      Process.kill(:KILL, -pgid)
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end

    # Reads `io` into `buffer` until its end or until it is closed, keeping the last MiB.
    def drain(io, buffer)
      loop do
        buffer << io.readpartial(1 << 16)
        buffer.slice!(0, buffer.bytesize - (1 << 20)) if buffer.bytesize > 1 << 20
      end
    rescue EOFError, IOError
      buffer
    end

    # (The extension names the cache file: without it, nothing to say.)
    def cache(dir)
      return nil unless dir && Native.available?

      path = File.join(dir, Native::CACHE_FILE)
      st = File.stat(path)
      owner = (Etc.getpwuid(st.uid).name rescue st.uid) # rubocop:disable Style/RescueModifier
      { "path" => path, "exists" => true, "size" => st.size, "owner" => owner, "mode" => format("%o", st.mode & 0o7777),
        "age_s" => (Time.now - st.mtime).round }
    rescue SystemCallError
      { "path" => path, "exists" => false }
    end

    # Advice that is no problem (the exit status stays 0). On CI (CI set, as Rails' test.rb reads it
    # to eager-load): Bootsnap's compile cache keys on each file's mtime, which a fresh checkout
    # sets anew, so a cache restored from an earlier job misses every app file unless
    # BOOTSNAP_REVALIDATE is set (Bootsnap 1.18+: it then compares the contents and keeps the entry).
    def notes(r)
      b = r["bootsnap"]
      return [] unless b && b["compile_cache"] && !@env["CI"].to_s.strip.empty?

      can = Gem::Version.new(b["version"]) >= Gem::Version.new("1.18")
      return [] if can && b["revalidate"]

      how = if can
              "set BOOTSNAP_REVALIDATE=1 in CI's environment"
            else
              "Bootsnap #{b["version"]} cannot revalidate: Bootsnap 1.18 or newer with BOOTSNAP_REVALIDATE=1 can"
            end
      ["on CI, Bootsnap's compile cache misses every file of a fresh checkout (it keys on mtime, which the checkout " \
       "sets anew) and compiles it again: #{how}, so a restored cache keeps the files whose contents did not change " \
       "(#{CI_REVALIDATE_FIGURE})"]
    end

    def problems(r)
      list = []
      return ["the boot could not run: #{r["trial_error"]}"] if r["trial_error"]
      if r["timed_out"]
        output = r["boot_output"].empty? ? "" : " (its last output: #{r["boot_output"]})"
        return ["#{r["boot"] || "the boot"} hangs: it had not finished after #{format("%g", r["timed_out"])} s and was stopped#{output}; " \
                "find what it waits for, or give it longer with `loadscan --timeout SECONDS doctor`"]
      end

      list << "the boot failed: #{r["boot_error"]}" if r["boot_error"]
      if r["native_not_built"]
        list << r["native"] # what was missing at install, and how to get the library
      elsif r["native"]
        list << "the extension did not load (#{r["native"]}): rebuild it (`gem pristine loadscan`, or `rake compile`)"
      end
      unless r["set_up_by_boot"]
        list << "#{r["boot"] || "the boot"} does not set loadscan up: add `require \"loadscan/setup\"` after " \
                "`require \"bundler/setup\"` in config/boot.rb (and `gem \"loadscan\", require: \"loadscan/railtie\"` to a Rails app's Gemfile)"
      end
      if r["active"] && !r["engaged"]
        list << "require does not reach loadscan: Kernel#require is #{r["require"]}, which does not call the require " \
                "it replaced; set loadscan up after it"
      end
      (r["setting_problems"] || []).each { |p| list << "setting: #{p}" }
      if (last = r["last_boot"]) && !last["engaged"]
        list << "the last boot (#{last["program"]}, #{last["at"]}) did not reach loadscan: something set up after it " \
                "redefined require; its warning names it (`LOADSCAN_STATS=1` shows the figures)"
      end
      c = r["cache"]
      if c && c["exists"] && r["stats"] && r["stats"]["roots_from_cache"].to_i.zero? && r["stats"]["load_path_entries"].to_i.positive?
        list << "the cache at #{c["path"]} served no entry (another Ruby or loadscan wrote it, or it is not trusted): " \
                "boot once to rewrite it, or `loadscan clear`"
      end
      list
    end
  end
end
