# frozen_string_literal: true

require "tmpdir"
require "etc"
require_relative "gc_advice"
require_relative "child_boot"

module Loadscan
  # `loadscan doctor`: boots the app the way it boots (config/boot.rb when there is one, else
  # Bundler when there is a Gemfile) in a separate Ruby process, and reports whether `require`
  # reaches loadscan there and whether loadscan answers it (a trial require: `ok` needs it
  # answered from the index, not only reached), the versions involved, the settings in effect,
  # the cache, and what the boot's index answered; where the boot does not set loadscan up,
  # nothing of doctor's own process as the app's. Each problem comes with the fix in words; any
  # problem makes the exit status 1. A boot that has not finished after `timeout` seconds is
  # stopped and reported as hanging.
  class Doctor
    # bench/ci.rb's measurement of what BOOTSNAP_REVALIDATE saves a fresh checkout's CI boot.
    CI_REVALIDATE_FIGURE = "with it, a fresh checkout's eager-loading boot of a Rails 7.2 app with 316 files of its own took " \
                           "0.80 of the CPU time it took without: bench/ci.rb, Bootsnap 1.26.1, Ruby 3.3.8"
    # The feature of the trial require (BOOT_SCRIPT), in a directory of doctor's own.
    TRIAL_FEATURE = "loadscan_doctor_trial"
    # Runs in the child: the app's own boot, as the parent chose it (`boot_file`, ARGV[2]; empty
    # for none), then a report (Marshal, to the path in ARGV[0]). What the report says of the app
    # is what its boot did: where the boot did not set loadscan up, the child sets it up itself
    # (loadscan/setup by the absolute path in ARGV[1]: the cache dir, the GC figures the advice
    # needs) and reports none of that process's own as the app's. With a directory in ARGV[3],
    # the trial require: a plain `require` of a file only that directory (pushed on $LOAD_PATH)
    # has, as the app's own requires go, and what loadscan's figures say of it (answered from
    # the index, or left to Ruby and why). ARGV[4]: the app's own LOADSCAN_READONLY (the child
    # runs read-only whatever it says).
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
      rss_kb = -> { File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1]&.to_i rescue nil } # rubocop:disable Style/RescueModifier
      report["rss_kb"] = rss_kb.()
      report["environment"] = %w[RAILS_ENV RACK_ENV].to_h { |name| [name, ENV[name]] }
      # Set up, or tried to (a setup that stayed off, as without the extension, still keeps its config).
      ours = defined?(Loadscan) && Loadscan.respond_to?(:active?) && (Loadscan.active? || !Loadscan.config.nil?) ? true : false
      report["set_up_by_boot"] = ours
      report["require"] = Kernel.instance_method(:require).source_location&.join(":") || "a C function (Ruby's own or loadscan's)"
      require ARGV.fetch(1) unless ours # loadscan/setup, by absolute path: doctor's own
      report["ruby"] = RUBY_DESCRIPTION
      report["rubygems"] = defined?(Gem::VERSION) ? Gem::VERSION : nil
      report["bundler"] = defined?(Bundler::VERSION) ? Bundler::VERSION : nil
      report["active"] = ours && Loadscan.active?
      report["native"] = Loadscan::Native.available? ? nil : Loadscan::Native.load_error.message
      # (Only then: why the source gem's install built no library.)
      report["native_not_built"] = Loadscan::Native.not_built if Loadscan::Native.respond_to?(:not_built) && Loadscan::Native.not_built
      report["engaged"] = ours && Loadscan.engaged?
      if (config = Loadscan.config)
        # As the app's boot has them: read-only as its own LOADSCAN_READONLY says (or its setup's `readonly: false`).
        app_readonly = Loadscan::Config.new(env: ENV.to_h.merge("LOADSCAN_READONLY" => ARGV[4])).readonly
        report["settings"] = { "enabled" => config.enabled, "cache_dir" => config.cache_dir, "validate" => config.validate,
                               "readonly" => config.readonly && app_readonly, "lazy" => config.lazy, "threads" => config.threads }
        report["setting_problems"] = config.problems
      end
      stats = Loadscan.stats&.transform_keys(&:to_s)
      report["gc"] = stats&.[]("gc") # the GC advice's figures (doctor's own setup's where the boot has none)
      report["stats"] = stats if ours
      if ours && Loadscan.active? && !ARGV[3].to_s.empty?
        before = Loadscan.stats
        # (A LoadError is an answer, a wrong one; anything else, as a frozen $LOAD_PATH, none: "answered" nil.)
        tried, error = begin
          $LOAD_PATH.push(ARGV[3])
          require "loadscan_doctor_trial" # TRIAL_FEATURE
          [true, nil]
        rescue LoadError => e
          [true, e.message]
        rescue StandardError => e
          [false, "#{e.class}: #{e.message}"]
        end
        after = Loadscan.stats
        left = after[:left_to_ruby].filter_map { |reason, n| reason.to_s if n > before[:left_to_ruby][reason] }
        # And the whole trial boot's figures, from loadscan's setup on, this require included.
        report["trial_require"] = { "answered" => tried ? after[:hits] > before[:hits] : nil, "left_to_ruby" => left.first,
                                    "error" => error, "hits" => after[:hits],
                                    "requires" => after[:hits] + after[:misses] + after[:deferred] }
      end
      if defined?(Bootsnap::LoadPathCache) && Bootsnap::LoadPathCache.respond_to?(:enabled?) # Bootsnap loaded by the boot
        on = Bootsnap::LoadPathCache.enabled?
        report["bootsnap_load_path_cache"] = on ? "on" : "off"
        # (A setup after Bootsnap's leaves it on whatever loadscan asked: only an "off" cache was turned off.)
        report["bootsnap_turned_off_by_loadscan"] = ours && !on && Loadscan.respond_to?(:bootsnap) && Loadscan.bootsnap == :turned_off
        # Its require stands in front of loadscan's: it answers the features it finds, with their absolute paths.
        report["bootsnap_in_front"] = on && Kernel.private_method_defined?(:require_without_bootsnap)
      end
      if defined?(Bootsnap::VERSION) # its compile cache, and whether it revalidates (as Bootsnap reads BOOTSNAP_REVALIDATE)
        iseq = defined?(Bootsnap::CompileCache::ISeq) && Bootsnap::CompileCache::ISeq.respond_to?(:cache_dir) && Bootsnap::CompileCache::ISeq.cache_dir
        report["bootsnap"] = { "version" => Bootsnap::VERSION.to_s, "compile_cache" => iseq ? true : false,
                               "revalidate" => !["0", "false", nil].include?(ENV["BOOTSNAP_REVALIDATE"]) }
      end
      File.binwrite(ARGV.fetch(0), Marshal.dump(report))
    RUBY

    # The command that runs BOOT_SCRIPT: `dirs` in front of the load path (-I), the report to
    # `out`, `boot` (ChildBoot.boot_file; nil: none), the trial require's directory (nil: none)
    # and the app's own LOADSCAN_READONLY.
    def self.boot_command(dirs, out, boot, trial_lib, app_readonly)
      [RbConfig.ruby, *dirs.flat_map { |d| ["-I", d] }, "-e", BOOT_SCRIPT, out, File.expand_path("../setup", __dir__),
       boot.to_s, trial_lib.to_s, app_readonly.to_s]
    end

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
      r.delete("gc") # (for the GC advice's boots: this boot's are in its stats, if the boot set loadscan up)
      r["cache"] = cache(r.dig("settings", "cache_dir"))
      r["last_boot"] = r.dig("settings", "cache_dir")&.then { |dir| LastBoot.read(dir) }
      if r["ruby"]
        r["gc_settings"] = GCAdvice.new(r["last_boot"]) { |env, full| Output.utf8(trial_boot(env, trial: false, full: full)) }.report
      end
      r["problems"] = problems(r)
      n = notes(r)
      r["notes"] = n unless n.empty?
      r["ok"] = r["problems"].empty?
      r
    end

    # The report in lines, by part: each part a method of its own (a line to add goes in its part).
    def self.text(report)
      # The boot hung or failed before it could say anything: only what went wrong.
      return ["boot: #{report["boot"] || "-"}", *report["problems"].map { |p| "PROBLEM: #{p}" }] unless report["ruby"]

      [*boot_lines(report), *loadscan_lines(report), *bootsnap_lines(report), *last_boot_lines(report),
       *GCAdvice.text(report["gc_settings"]), *(report["notes"] || []).map { |n| "note: #{n}" },
       *(report["problems"].empty? ? ["ok"] : report["problems"].map { |p| "PROBLEM: #{p}" })]
    end

    # Which Ruby, RubyGems and Bundler, and what the trial boot ran.
    def self.boot_lines(report)
      ["ruby: #{report["ruby"]}", "rubygems: #{report["rubygems"] || "-"}, bundler: #{report["bundler"] || "-"}",
       "boot: #{report["boot"] || "none found (no config/boot.rb, no Gemfile)"}"]
    end

    # loadscan in the app's boot: set up, reached, answering (the trial require), its index,
    # cache and settings. Where the boot does not set it up, nothing of doctor's own process.
    def self.loadscan_lines(report)
      ours = report["set_up_by_boot"]
      reach = if ours then "#{report["engaged"] ? "yes" : "no"} (Kernel#require: #{report["require"]})"
              else "no: the boot does not set it up (Kernel#require: #{report["require"]})"
              end
      lines = ["loadscan set up by the boot: #{ours ? "yes" : "no"}", "require reaches loadscan: #{reach}"]
      if (t = report["trial_require"])
        how = case t["answered"]
              when true then "answered from the index"
              when false then "left to Ruby (#{t["left_to_ruby"] || t["error"] || "not answered"})"
              else "not tried (#{t["error"]})"
              end
        lines << "requires answered by loadscan: #{t["hits"]} of the trial boot's #{t["requires"]} (from its setup on); " \
                 "a plain require of a file on the load path: #{how}"
      end
      if (s = report["stats"])
        lines << "index: #{s["load_path_entries"]} entries (#{s["roots_from_cache"]} from the cache), #{s["features"]} features"
      end
      if (c = report["cache"])
        lines << (c["exists"] ? "cache: #{c["path"]} (#{c["size"]} bytes, owner #{c["owner"]}, mode #{c["mode"]}, #{c["age_s"]} s old)" : "cache: none yet at #{c["path"]}")
      end
      settings = report["settings"]&.map { |k, v| "#{k}=#{v}" }&.join(", ")
      lines << (ours ? "settings: #{settings}" : "settings (the environment's; the boot does not set loadscan up): #{settings}")
    end

    # Bootsnap's load-path cache, where the boot loaded Bootsnap.
    def self.bootsnap_lines(report)
      state = report["bootsnap_load_path_cache"] or return []
      why = if report["bootsnap_in_front"] && report["set_up_by_boot"] then ", in front of loadscan (set up before it)"
            elsif report["bootsnap_turned_off_by_loadscan"] then ", turned off by loadscan/setup: loadscan answers require"
            end
      ["Bootsnap's load-path cache: #{state}#{why}"]
    end

    def self.last_boot_lines(report)
      last = report["last_boot"]
      ["last boot: #{last ? LastBoot.describe(last) : "none recorded yet"}",
       *("last boot's #{LastBoot.describe_gc(last["gc"])}" if last&.dig("gc")),
       *("last boot's #{LastBoot.describe_compile_cache(last["compile_cache"])}" if LastBoot.describe_compile_cache(last&.dig("compile_cache")))]
    end

    private

    # A boot of the app in a child (BOOT_SCRIPT), read-only, with `extra_env` over the app's
    # environment (ChildBoot.app_env: doctor's own from before Bundler's setup, under `bundle exec`
    # too); with the trial require (`trial`); `full`: a Rails app's whole boot
    # (config/environment.rb), as the GC advice asks where the last boot went that far.
    def trial_boot(extra_env = {}, trial: true, full: false)
      Dir.mktmpdir("loadscan-doctor") do |tmp|
        out = File.join(tmp, "report")
        lib = File.join(tmp, "lib")
        if trial
          Dir.mkdir(lib)
          File.write(File.join(lib, "#{TRIAL_FEATURE}.rb"), "")
        end
        app_env = ChildBoot.app_env(@env).merge(extra_env)
        env = app_env.merge("LOADSCAN_READONLY" => "1") # looking, not writing
        env["LOADSCAN_CACHE_DIR"] = @options[:cache_dir] if @options[:cache_dir]
        boot = ChildBoot.boot_file(@app, env, full: full)
        cmd = self.class.boot_command(@dirs, out, boot, trial ? lib : nil, app_env["LOADSCAN_READONLY"])
        status, err = ChildBoot.run(env, cmd, chdir: @app, timeout: @timeout)
        return { "boot" => boot, "timed_out" => @timeout, "boot_output" => ChildBoot.last_lines(err) } unless status
        unless status.success? && File.file?(out)
          how = status.exitstatus ? "exit #{status.exitstatus}" : "signal #{status.termsig}"
          return { "boot" => boot, "trial_error" => [how, ChildBoot.last_lines(err)].reject(&:empty?).join(": ") }
        end

        Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad -- our own child wrote it
      end
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
      list << not_set_up(r) unless r["set_up_by_boot"]
      if r["set_up_by_boot"] && !r["native"] && !r["active"]
        list << if r.dig("settings", "enabled") == false
                  "loadscan is disabled (LOADSCAN_DISABLE, or `enabled: false` to Loadscan.setup): require is Ruby's own"
                else
                  "loadscan/setup ran but loadscan stayed off: require is Ruby's own (the boot's warning says why)"
                end
      end
      if r["active"] && !r["engaged"]
        list << "require does not reach loadscan: Kernel#require is #{r["require"]}, which does not call the require " \
                "it replaced; set loadscan up after it"
      end
      list << not_answering(r) if r["engaged"] && r.dig("trial_require", "answered") == false
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

    # The boot does not set loadscan up: what `loadscan install` does, or where the line goes by hand.
    def not_set_up(r)
      before = " and before `require \"bootsnap/setup\"`" if r["bootsnap"] # (the boot loaded Bootsnap)
      where = "`require \"loadscan/setup\"` after `require \"bundler/setup\"`#{before}"
      fix = if File.file?(File.join(@app, "config", "boot.rb"))
              "run `loadscan install`: it adds `gem \"loadscan\"` to the Gemfile and #{where} to config/boot.rb"
            else
              "add #{where} where the program sets Bundler up (`loadscan install` does it for an app with a config/boot.rb)"
            end
      "#{r["boot"] || "the boot"} does not set loadscan up: #{fix}"
    end

    # require reaches loadscan, but loadscan did not answer the trial's plain require of a file on
    # the load path (the figures: the trial boot's and the last boot's, hits against requires).
    def not_answering(r)
      t = r["trial_require"]
      figures = "loadscan answered #{t["hits"]} of the trial boot's #{t["requires"]} requires"
      if (last = r["last_boot"])
        requires = %w[hits misses deferred].sum { |k| last[k].is_a?(Integer) ? last[k] : 0 }
        figures += " and #{last["hits"].to_i} of the last boot's #{requires}"
      end
      if r["bootsnap_in_front"]
        "loadscan must come before bootsnap/setup: Bootsnap's load-path cache answers requires in front of loadscan, " \
          "which sees them as absolute paths and leaves them to Ruby (#{figures}); run `loadscan install`, which puts " \
          "`require \"loadscan/setup\"` before `require \"bootsnap/setup\"` in config/boot.rb"
      else
        why = t["left_to_ruby"]&.tr("_", " ") || t["error"] || "not answered"
        "loadscan does not answer the boot's requires: a plain require of a file on the load path was left to Ruby " \
          "(#{why}; #{figures}); `loadscan explain FEATURE` says why for one feature"
      end
    end
  end
end
