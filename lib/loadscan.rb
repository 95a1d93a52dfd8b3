# frozen_string_literal: true

# loadscan: a load-path cache for Ruby's `require`, with a Rust core.

# Loaded already from another copy of this version: config/loadscan_boot.rb set loadscan up
# before Bundler from the copy Gemfile.lock names, and Bundler's load path holds another one (the
# same version installed twice). The first stays; a second would define everything again.
return if defined?(::Loadscan) && ::Loadscan.respond_to?(:setup)

# The table of contents, in load order:
require_relative "loadscan/version"
require_relative "loadscan/native"
require_relative "loadscan/config"

module Loadscan
  # Loaded when first referenced: a boot that warns nothing (nearly all of them) does not
  # compile them.
  autoload :Warnings, File.expand_path("loadscan/warnings", __dir__)
  autoload :Instrumentation, File.expand_path("loadscan/instrumentation", __dir__)
  autoload :LastBoot, File.expand_path("loadscan/last_boot", __dir__)
  autoload :Profile, File.expand_path("loadscan/profile", __dir__)

  class << self
    # The configuration in effect after setup (nil before).
    attr_reader :config

    # Starts resolving `require` from the index. Safe to call more than once; returns true when
    # loadscan is active, false when it stays out of the way (disabled, or the native extension
    # could not load — then with one warning, and Ruby's require is untouched). Called again
    # with settings once active (a program that sets itself up when `RUBYOPT=-rloadscan/setup`
    # already did, as the command line does), those settings replace the first ones: the index
    # starts again on them if they change what it reads.
    def setup(**options)
      return reconfigure(options) if @active

      # LOADSCAN_PROFILE=path: the boot is profiled from here at the latest (loadscan/setup
      # starts it before loading loadscan; README, "Boot profile"). Requiring loadscan starts nothing.
      Profile.start_from_env(ENV["LOADSCAN_PROFILE"]) if ENV["LOADSCAN_PROFILE"] || ENV["LOADSCAN_PROFILE_EXEC"]

      bootsnap_load_path_cache(engaged = engage(options))
      engaged
    end

    # Whether Bootsnap's load-path cache is left off for loadscan (bootsnap_load_path_cache):
    # `:turned_off` (by this setup: loadscan engaged), `:off` (so before loadscan), nil (loadscan
    # not engaged). A Bootsnap set up before loadscan answers in front of it whatever this says
    # (CoreExt.check warns once).
    attr_reader :bootsnap

    # setup's work: true when `require` goes through loadscan.
    private def engage(options)
      @config = Config.new(**options)
      @config.problems.each { |message| Warnings.once(message, message) }
      return false unless @config.enabled

      if box_enabled?
        Warnings.once(:box, "Ruby::Box is enabled (RUBY_BOX=1): each box has its own $LOAD_PATH and $LOADED_FEATURES, " \
                            "which loadscan does not follow; booting with Ruby's own require")
        return false
      end

      unless Native.available?
        Warnings.once(:native, Native.not_built ? NotBuilt.warning(Native.not_built) :
          "native extension could not be loaded (#{Native.load_error.message}); booting with Ruby's own require")
        return false
      end

      last_boot = start_index(@config)
      require_relative "loadscan/core_ext/kernel"
      require_relative "loadscan/core_ext/load_path"
      require_relative "loadscan/core_ext/process"
      unless CoreExt.attach
        Native.stop
        Warnings.once(:disengaged, "Ruby's own require is bound nowhere in Kernel (something replaced every " \
                                   "binding of it before loadscan was set up); booting with Ruby's own require")
        return false
      end
      CoreExt::LoadPath.attach
      CoreExt::Fork.attach
      install_at_exit_save
      @before_bundler = !defined?(::Bundler)
      @active = true
      start_boot_gc(@config, last_boot)
      CoreExt.check
      start_compile_cache(@config)
      true
    end

    # Tells loadscan the program has booted (Rails apps need not: the railtie does, at
    # after_initialize). GC deferred during the boot runs again from now on (README, "GC during
    # the boot"). True when this ended the boot, false when it had ended already (or loadscan is
    # not set up).
    def booted!
      active? && end_boot(:booted)
    end

    # loadscan's compile cache (README, "Compile cache"), where the settings keep it on.
    private def start_compile_cache(config)
      return unless config.compile_cache

      require_relative "loadscan/compile_cache"
      CompileCache.start(config)
    end

    # The end of the boot (`why`: :booted, or :rails from the railtie's after_initialize): GC
    # deferred during the boot runs again, and the variable that kept Bootsnap's load-path cache
    # off for this boot (read by `bootsnap/setup` in config/boot.rb) is taken back, so the
    # programs this one starts keep theirs. True when this ended the boot.
    def end_boot(why)
      ENV.delete(BOOTSNAP_VAR) if @bootsnap == :turned_off && ENV[BOOTSNAP_VAR] == BOOTSNAP_OFF
      defined?(BootGC) ? BootGC.finish(why) : false
    end

    # Records what each require, require_relative, load, autoload and Rails initializer the
    # block runs costs (README, "Boot profile"), and returns it: a Loadscan::Profile::Tree.
    def profile(name: "Loadscan.profile", &block)
      Profile.run(name: name, &block)
    end

    # Whether `require` currently goes through loadscan.
    def active?
      @active == true
    end

    # Whether a plain `require` reaches loadscan right now (false before setup, or when
    # something in front of it no longer calls the require it replaced: then loadscan has
    # warned once).
    def engaged?
      active? && CoreExt.engaged?
    end

    # The file `require(feature)` would load according to the index, ignoring what is already
    # loaded (compare `$LOAD_PATH.resolve_feature_path`): an absolute path, `:missing` when no
    # entry has it, or `:unknown` when Ruby's own require has to decide.
    def lookup(feature)
      active? ? Native.lookup(feature) : :unknown
    end

    # Counters: `hits` (requires the index answered), `deferred` (left to Ruby's own
    # require) and `left_to_ruby` (those by reason: `unsure_miss`, a miss the index cannot be
    # sure of; `not_feature`, absolute or `./` paths; `not_string`; `loaded` under another
    # spelling or being loaded; `blind_spot`; `unavailable`), `engaged` (see engaged?), `bootsnap_load_path_cache` (see bootsnap), entries
    # scanned, features indexed, timings, `setup_before_bundler` (set up before Bundler was
    # loaded: at config/boot.rb's first line, config/loadscan_boot.rb), and `compile_cache` (nil
    # when off): `hits` (files served from it), `misses` (compiled by Ruby, kept for the next
    # boot), `bypasses` (left to Ruby unasked: coverage, an unreadable file), `bytes_read`,
    # `bytes_written`, `entries`, `pending`.
    def stats
      stats = active? ? Native.stats : nil
      stats&.merge(engaged: CoreExt.engaged?, bootsnap_load_path_cache: @bootsnap, gc: BootGC.figures,
                   setup_before_bundler: @before_bundler, compile_cache: defined?(CompileCache) ? CompileCache.stats : nil)
    end

    # Everything the scanner worked around, as `[kind, message]` pairs (`:loop`, `:unreadable`,
    # `:dangling`, …): lookups below those paths go to Ruby's require.
    def problems
      active? ? Native.problems : []
    end

    # Writes the cache now if anything changed since it was read (loadscan also does this at
    # exit of the process that set it up). Returns :written, :clean or :skipped; a failure is
    # one warning and :failed, never an exception.
    def save
      result = save_cache
      instrument(:cache_write) { { cache_dir: @config&.cache_dir, result: result } }
      result
    end

    # Deletes the cache and the last boot's figures in `dir` (default: this process's cache
    # dir) and returns the paths removed. This process then writes neither at exit, so
    # `rake loadscan:clear` leaves the next boot a cold start. A directory that fails the cache
    # dir's checks (owner, mode) is left alone, with one warning.
    def clear_cache(dir = @config&.cache_dir)
      return [] unless dir && Native.available?

      removed = Native.clear_cache(dir)
      return removed if removed.is_a?(Array)

      Warnings.once(:clear, removed)
      []
    end

    # Receives loadscan's events (see Loadscan::Instrumentation): `->(event, payload) { … }`. Set
    # it before setup to hear :cache_load (`require "loadscan"`, then this, then `Loadscan.setup`).
    # What publishes them is loaded now, not on the first event in the middle of a require (the
    # require of loadscan's own file would be an event too, published while it loads).
    def instrumentation=(hook)
      Instrumentation.then { Warnings }
      @instrumentation = hook
    end

    private

    # Bootsnap's load-path cache would answer requires before loadscan: `require "bootsnap/setup"`,
    # after loadscan's, leaves it off (DISABLE_BOOTSNAP_LOAD_PATH_CACHE, any value) while loadscan
    # is engaged, and keeps it where loadscan is not (disabled, not built, an unsupported Ruby):
    # the value an engaged parent's loadscan set ("loadscan") is taken back.
    BOOTSNAP_VAR = "DISABLE_BOOTSNAP_LOAD_PATH_CACHE"
    BOOTSNAP_OFF = "loadscan"

    def bootsnap_load_path_cache(engaged)
      if !engaged
        ENV.delete(BOOTSNAP_VAR) if ENV[BOOTSNAP_VAR] == BOOTSNAP_OFF
      elsif ENV[BOOTSNAP_VAR] && ENV[BOOTSNAP_VAR] != BOOTSNAP_OFF
        @bootsnap = :off
      else
        ENV[BOOTSNAP_VAR] = BOOTSNAP_OFF
        @bootsnap = :turned_off
      end
    end

    # Whether Ruby 4.0's boxes are on (`RUBY_BOX=1`): each `Ruby::Box` then has a `$LOAD_PATH`
    # and `$LOADED_FEATURES` of its own, and a `require` in one searches only its own, while
    # loadscan follows one `$LOAD_PATH` for the whole process. A Ruby without `Ruby::Box` is
    # asked through the variable (a preview that spells the API otherwise).
    def box_enabled?
      defined?(Ruby::Box) && Ruby::Box.respond_to?(:enabled?) ? Ruby::Box.enabled? : ENV["RUBY_BOX"] == "1"
    end

    # Starts the index on `config`'s settings, which then are those in effect, in one call (the
    # cache read, the first sync); returns the last boot's record found beside the cache (a
    # String) or nil. An interrupt that comes while it waits for another thread to let go of
    # the index (`Thread#raise`, `Interrupt`) is raised from here with both as they were.
    def start_index(config)
      warning, last_boot, figures = Native.start($LOAD_PATH, **index_options(config), readonly: config.readonly,
                                                 on_problems: method(:scan_problems), on_defer: method(:left_to_ruby),
                                                 on_rescan: method(:rescanned))
      @config = config
      Warnings.once(:cache, warning) if warning
      instrument(:cache_load) do
        { cache_dir: config.cache_dir, roots_from_cache: figures[:roots_from_cache], roots_scanned: figures[:roots_scanned],
          ms: figures[:setup_ms], warning: warning }
      end
      last_boot
    end

    # GC deferred from now until the boot ends (LOADSCAN_GC, Loadscan::BootGC), where the boot
    # has a known end: a Rails app's config/boot.rb sets loadscan up, or this program's last boot
    # (its record beside the cache, `last_boot`) ended at after_initialize or `Loadscan.booted!`.
    def start_boot_gc(config, last_boot)
      require_relative "loadscan/boot_gc"
      last_end = if config.gc != false && last_boot
                   require_relative "loadscan/last_boot" # not through `require` (the autoload): not a require of the app's
                   LastBoot.gc_end(last_boot, BootGC.key)
                 end
      rails = config.gc == :auto && caller_locations.any? { |l| (l.absolute_path || l.path).to_s.end_with?("/config/boot.rb") }
      BootGC.start(mode: config.gc, last_end: last_end, rails: rails)
    end

    # What the index is built from: settings that differ mean another index.
    def index_options(config)
      { dlext: config.dlext, threads: config.threads, cache_dir: config.cache_dir, env_key: config.env_key,
        validate: config.validate, stable_dirs: config.stable_dirs, lazy: config.lazy, ignore_names: config.ignore_names,
        ignore_paths: config.ignore_paths }
    end

    # A later setup with settings: they apply (readonly: from now on, at exit too); an index
    # built from other ones (another cache dir, a full listing) starts again. Not disabling:
    # `enabled: false` changes nothing once require goes through loadscan.
    def reconfigure(options)
      return true if options.empty?

      config = Config.new(**options)
      config.problems.each { |message| Warnings.once(message, message) }
      return true unless config.enabled

      # Not before the index started on them: an interrupted start leaves the old index and its
      # settings in effect.
      if index_options(@config) != index_options(config)
        start_index(config)
      elsif config.readonly != @config.readonly
        Native.set_readonly(config.readonly)
      end
      @config = config
      BootGC.finish(:off) if config.gc == false
      true
    end

    # The cache written where the extension's one rule allows (not read-only, not cleared).
    def save_cache
      active? ? saved(Native.save) : :skipped
    end

    # What the extension said of a write: a Symbol, or why it failed (warned once: :failed).
    def saved(result)
      return result if result.is_a?(Symbol)

      Warnings.once(:cache_write, result)
      :failed
    end

    # New scan problems, warned in the middle of a require: a `Warning.warn` of the app's that
    # raises is not the require's failure.
    def scan_problems(problems)
      Warnings.guarded(:scan_warning, "the scan warning") { Warnings.scan_problems(problems) }
    end

    # A require the index left to Ruby's own: only for `Loadscan.instrumentation`. Not published
    # through ActiveSupport::Notifications, whose first use loads files of its own in the middle
    # of the app's require (the app's $LOADED_FEATURES would no longer be stock's).
    def left_to_ruby(feature, reason)
      Instrumentation.publish(@instrumentation, :require_left_to_ruby, { feature: feature, reason: reason }, notify: false) if @instrumentation
    end

    # Entries a `$LOAD_PATH` change made during the boot had listed (the first scan is
    # :cache_load's): for `Loadscan.instrumentation` only, as `left_to_ruby`.
    def rescanned(roots_scanned, roots_refreshed, ms)
      return unless @instrumentation

      Instrumentation.publish(@instrumentation, :rescan,
                              { roots_scanned: roots_scanned, roots_refreshed: roots_refreshed, ms: ms }, notify: false)
    end

    # Publishes an event, building its payload only when someone listens.
    def instrument(event)
      return unless @instrumentation || defined?(ActiveSupport::Notifications)

      Instrumentation.publish(@instrumentation, event, yield)
    end

    def install_at_exit_save
      return if @at_exit_installed

      @at_exit_installed = true
      owner = Process.pid
      at_exit do
        next unless Process.pid == owner # forked children (server workers) do not write

        CoreExt.recheck
        BootGC.finish(:exit)
        CompileCache.finish if defined?(CompileCache)
        finish_session
      end
    end

    # The session's end, in one call: the extension writes the cache and keeps this boot's
    # figures beside it (`loadscan stats`, `doctor`; read back by Loadscan::LastBoot) under its
    # one rule: never in a read-only, cleared or untrusted cache dir.
    def finish_session
      fields = boot_fields
      result, unrecorded, figures = Native.finish(fields)
      result = saved(result || :skipped)
      instrument(:cache_write) { { cache_dir: @config&.cache_dir, result: result } }
      Warnings.once(:last_boot, unrecorded) if unrecorded
      Kernel.warn(stats_line(fields.merge(cache: result.to_s), figures), uplevel: nil) if @config.stats
    end

    # What this boot adds to its figures in its record (the extension adds what the cache did):
    # when, which program, which Ruby, its environment (RAILS_ENV, RACK_ENV: nil when unset),
    # whether `require` reached loadscan at exit, and its GC.
    def boot_fields
      { at: Time.now.utc.strftime("%Y-%m-%dT%H:%M:%SZ"), pid: Process.pid, program: $PROGRAM_NAME.to_s,
        ruby: RUBY_VERSION, environment: { "RAILS_ENV" => ENV["RAILS_ENV"], "RACK_ENV" => ENV["RACK_ENV"] },
        engaged: CoreExt.engaged?, gc: BootGC.figures, compile_cache: defined?(CompileCache) ? CompileCache.stats : nil }
    end

    # The LOADSCAN_STATS=1 line: this boot's figures, as `loadscan stats` shows the last boot's.
    def stats_line(fields, figures)
      return "loadscan: stopped" unless figures

      record = fields.merge(figures).transform_keys(&:to_s)
      cc = LastBoot.describe_compile_cache(fields[:compile_cache])
      "loadscan: #{LastBoot.describe(record, who: false)}; #{LastBoot.describe_gc(fields[:gc])}#{"; #{cc}" if cc}"
    end
  end
end
