# frozen_string_literal: true

require_relative "native"
require_relative "app"

module Loadscan
  # Settings, from keywords to `Loadscan.setup` or else LOADSCAN_* environment variables:
  #
  #   LOADSCAN_DISABLE=1          leave require alone (setup does nothing)
  #   LOADSCAN_CACHE_DIR=DIR      where the cache lives, an absolute path (default: tmp/cache/loadscan
  #                               in the app, Loadscan::App; outside any app, the user's cache dir)
  #   LOADSCAN_CACHE=0            no cache: scan on every boot
  #   LOADSCAN_VALIDATE=listing   check the app's dirs by their entry names, not mtimes, so a
  #                               cache survives a fresh `git checkout` (CI workers); the
  #                               default where CI is set (CI=true), else mtime
  #   LOADSCAN_READONLY=1         use the cache, never write it (CI workers sharing one)
  #   LOADSCAN_THREADS=N          scanner threads (default: the CPU count, at most 8; at most 64)
  #   LOADSCAN_LAZY=0             list every directory of every entry up front instead of only
  #                               the entries' own, and the rest as requires reach them
  #   LOADSCAN_STABLE_DIRS=A:B    more directories holding installed, never-edited code (besides
  #                               Gem.path, Bundler's path and Ruby's own), checked with one stat
  #                               per load-path entry instead of one per directory
  #   LOADSCAN_STATS=1            one summary line on stderr at exit
  #   LOADSCAN_COMPILE_CACHE=0    no compile cache: Ruby compiles every file it loads (default on
  #                               where loadscan is engaged: Loadscan::CompileCache)
  #   LOADSCAN_IGNORE_DIRS=A:B    directories never listed, left to Ruby's require: a name (every
  #                               directory so named, at any depth) or an absolute path; default
  #                               node_modules; empty: none (dot-directories are never listed)
  #   LOADSCAN_GC=auto            GC deferred from setup to the end of the boot (Ruby 3.4+ on
  #                               Linux, 3.3 with descriptors to spare: Loadscan::BootGC) where
  #                               the boot has a known end: a Rails app set up from
  #                               config/boot.rb, or a program whose last boot said it had
  #                               booted (`Loadscan.booted!`); the default.
  #                               on (or 1/true/yes): for every program; off (0/false/no): never
  #   LOADSCAN_REQUIRE_NATIVE=1   at install of the source gem (extconf.rb), not at boot: fail
  #                               when the Rust toolchain is missing instead of installing
  #                               without the library
  #
  # A setting never breaks a boot: a value that makes no sense gives one warning naming the
  # setting and what it accepts, and the default applies. Flags take 1/0, true/false, yes/no,
  # on/off in any case. An unknown LOADSCAN_* variable (a misspelling) gets one warning too.
  class Config
    FLAGS = { "1" => true, "true" => true, "yes" => true, "on" => true,
              "0" => false, "false" => false, "no" => false, "off" => false }.freeze
    # The core's names, the default first (none without the extension: setup then does nothing).
    VALIDATIONS = Native.available? ? Native::VALIDATIONS : [].freeze
    MAX_THREADS = 64
    # (REQUIRE_NATIVE is read at install time only, by extconf.rb: known, so that a CI job that
    # sets it for the whole job is not warned about it at boot.)
    KNOWN = %w[DISABLE CACHE_DIR CACHE VALIDATE READONLY THREADS LAZY STABLE_DIRS STATS IGNORE_DIRS
               GC REQUIRE_NATIVE PROFILE PROFILE_PARENT PROFILE_EXEC COMPILE_CACHE].map { "LOADSCAN_#{_1}" }.freeze
    # The test suite's own variables, passed down to the processes it boots.
    TEST_PREFIX = "LOADSCAN_TEST_"
    # The project's build and test scripts' variables (bin/, rakelib/, test/): not settings, and
    # not misspelt ones either (a developer who sets one for a session is not warned at every boot).
    DEVELOPMENT = %w[GEM_CACHE CARGO_CACHE NATIVE_RUBIES AARCH64_RUBIES GLIBC_FLOOR BLESS].map { "LOADSCAN_#{_1}" }.freeze

    attr_reader :enabled, :threads, :dlext, :cache_dir, :validate, :readonly, :lazy, :stats
    # Whether loaded files' instruction sequences come from loadscan's compile cache
    # (LOADSCAN_COMPILE_CACHE, `compile_cache:`).
    attr_reader :compile_cache
    # Whether GC is deferred during the boot (LOADSCAN_GC, `gc:`): true, false or :auto.
    attr_reader :gc
    # Directory names and absolute paths the scanner never lists (LOADSCAN_IGNORE_DIRS).
    attr_reader :ignore_names, :ignore_paths
    # The core's defaults (its ScanOptions; none without the extension: setup then does nothing).
    IGNORE_DEFAULT = Native.available? ? Native::DEFAULT_IGNORE_DIRS : [].freeze
    LAZY_DEFAULT = Native.available? ? Native::DEFAULT_LAZY : true
    # What was wrong with the settings, one message each (Loadscan.setup warns once with them).
    attr_reader :problems

    # The cache dir of the app a process runs in or for, one rule for `rake loadscan:clear` and
    # the command line: the one loadscan set up with in this process (`running`; the command
    # line gives nil: it runs beside the app), else the one the app's boot would pick
    # (`cache_dir`: `--cache-dir`; the environment). nil: no cache.
    def self.app_cache_dir(cache_dir: nil, env: ENV, running: Loadscan.config)
      running&.cache_dir || new(cache_dir: cache_dir, env: env).cache_dir
    end

    def initialize(enabled: nil, threads: nil, cache_dir: nil, cache: nil, validate: nil, readonly: nil,
                   stable_dirs: nil, lazy: nil, stats: nil, ignore_dirs: nil, gc: nil, compile_cache: nil, env: ENV)
      @env = env
      @problems = []
      unknown_variables
      @enabled = enabled.nil? ? !flag("LOADSCAN_DISABLE", false) : enabled
      @threads = threads_setting(threads)
      @validate = validate_setting(validate)
      @readonly = readonly.nil? ? flag("LOADSCAN_READONLY", false) : readonly
      @lazy = lazy.nil? ? flag("LOADSCAN_LAZY", LAZY_DEFAULT) : lazy
      @stats = stats.nil? ? flag("LOADSCAN_STATS", false) : stats
      @compile_cache = compile_cache.nil? ? flag("LOADSCAN_COMPILE_CACHE", true) : compile_cache
      @gc = gc.nil? ? gc_setting : gc
      cache = flag("LOADSCAN_CACHE", true) if cache.nil?
      @cache_dir = cache ? cache_dir_setting(cache_dir) : nil
      @ignore_names, @ignore_paths = ignore_setting(ignore_dirs)
      @extra_stable = stable_dirs || env["LOADSCAN_STABLE_DIRS"].to_s.split(File::PATH_SEPARATOR)
      # RbConfig is loaded whenever RubyGems is; without it the extension's own default applies.
      @dlext = defined?(RbConfig) ? RbConfig::CONFIG["DLEXT"] : ""
    end

    # The key a cache file must carry: written by another loadscan or Ruby, or with other
    # directories ignored, it is not used. A Ruby that links its extensions in
    # (`--with-static-linked-ext`) is another Ruby: the cache also keeps which features Ruby's
    # own search could not load, and that Ruby provides many with no file. Without RbConfig
    # (`--disable-gems`) dlext is empty, so such a boot has a key of its own anyway.
    def env_key
      ignored = (ignore_names + ignore_paths).join(File::PATH_SEPARATOR)
      linked = defined?(RbConfig) ? RbConfig::CONFIG["EXTSTATIC"].to_s : ""
      "loadscan #{VERSION} #{RUBY_REVISION} #{RUBY_PLATFORM} #{dlext} static=#{linked} ignore=#{ignored}"
    end

    # Directories whose contents only change on install (gems, Ruby's own libraries): cached
    # entries under them are checked with one stat of the entry instead of every directory.
    def stable_dirs
      dirs = @extra_stable.dup
      dirs.concat(Gem.path) if defined?(Gem) && Gem.respond_to?(:path)
      dirs << Bundler.bundle_path.to_s if defined?(Bundler) && Bundler.respond_to?(:bundle_path) && (Bundler.bundle_path rescue nil) # rubocop:disable Style/RescueModifier
      dirs << own_gem_home.to_s unless defined?(Bundler)
      if defined?(RbConfig)
        dirs.concat(RbConfig::CONFIG.values_at("rubylibprefix", "rubyarchprefix", "rubylibdir", "rubyarchdir",
                                               "sitelibdir", "sitearchdir", "vendorlibdir", "vendorarchdir").compact)
      end
      dirs.reject(&:empty?).filter_map { |d| File.realpath(d) rescue nil }.uniq # rubocop:disable Style/RescueModifier
    end

    private

    # Set up before Bundler (config/loadscan_boot.rb), loadscan cannot ask it for its path yet:
    # the gem home loadscan itself is installed in (Bundler's path, vendor/bundle/ruby/X.Y.0, where
    # one is set) stands for it. nil for a checkout or a `path:` or `git:` gem.
    def own_gem_home
      gem_dir = File.expand_path("../..", __dir__)
      home = File.dirname(File.dirname(gem_dir))
      home if File.basename(File.dirname(gem_dir)) == "gems" && File.file?(File.join(home, "specifications", "#{File.basename(gem_dir)}.gemspec"))
    end

    def problem(message)
      @problems << message
    end

    def unknown_variables
      @env.each_key do |name|
        next unless name.start_with?("LOADSCAN_") && !name.start_with?(TEST_PREFIX) && !KNOWN.include?(name) &&
                    !DEVELOPMENT.include?(name)

        guess = spelling_of(name)
        hint = guess ? " (did you mean #{guess}?)" : ""
        problem("#{name} is not a loadscan setting#{hint}; known: #{KNOWN.join(", ")}")
      end
    end

    # The known variable `name` most likely misspells, by Ruby's own spell checker (the one
    # behind NameError's "Did you mean?") on the part after LOADSCAN_, which they all share; nil
    # when none is close. Loaded only here, once a misspelling is found, and only the checker:
    # a Ruby run with --disable-did_you_mean keeps its error messages as they are. Without it
    # (a Ruby whose library cannot be loaded), the message goes without the hint.
    def spelling_of(name)
      require "did_you_mean/spell_checker"
      known = KNOWN.map { _1.delete_prefix("LOADSCAN_") }
      guess = DidYouMean::SpellChecker.new(dictionary: known).correct(name.delete_prefix("LOADSCAN_")).first
      guess && "LOADSCAN_#{guess}"
    rescue LoadError
      nil
    end

    # A flag variable: unset or empty means the default.
    # LOADSCAN_GC: a flag, or auto (the default).
    def gc_setting
      value = @env["LOADSCAN_GC"].to_s.strip.downcase
      return :auto if value.empty? || value == "auto"

      FLAGS.fetch(value) do
        problem("LOADSCAN_GC=#{@env["LOADSCAN_GC"].inspect} is not auto, on or off; using the default (auto)")
        :auto
      end
    end

    def flag(name, default)
      value = @env[name]
      return default if value.nil? || value.strip.empty?

      FLAGS.fetch(value.strip.downcase) do
        problem("#{name}=#{value.inspect} is not a flag (use 1/0, true/false, yes/no, on/off); using the default (#{default ? "on" : "off"})")
        default
      end
    end

    def choice(keyword, name, allowed)
      value = (keyword || @env[name]).to_s.strip.downcase
      return allowed.first if value.empty? || allowed.empty?
      return value if allowed.include?(value)

      problem("#{keyword ? "validate:" : name} #{value.inspect} is not one of #{allowed.join(", ")}; using #{allowed.first}")
      allowed.first
    end

    # LOADSCAN_VALIDATE, else `listing` on CI (CI set, as GitHub Actions, GitLab CI, CircleCI,
    # Travis and Buildkite set it, to anything but a false flag), else `mtime`. A CI job checks
    # the app out afresh and often restores the installed gems from a tarball, so every
    # directory has a new inode and mtime there: checked by mtime, nothing a restored cache
    # holds would be used. (CI's value is not a loadscan setting: no warning about it.)
    def validate_setting(keyword)
      ci = @env["CI"].to_s.strip.downcase
      choice(keyword, "LOADSCAN_VALIDATE", ci.empty? || FLAGS[ci] == false ? VALIDATIONS : VALIDATIONS.reverse)
    end

    def threads_setting(keyword)
      raw = keyword.nil? ? @env["LOADSCAN_THREADS"] : keyword
      return 0 if raw.nil? || raw.to_s.strip.empty?

      name = keyword.nil? ? "LOADSCAN_THREADS" : "threads:"
      n = Integer(raw.to_s.strip, 10)
      if n.negative?
        problem("#{name} #{raw.inspect} is negative (use 0 for automatic, or a count up to #{MAX_THREADS}); using automatic")
        0
      elsif n > MAX_THREADS
        problem("#{name} #{raw.inspect} is more threads than a scan can use; using #{MAX_THREADS}")
        MAX_THREADS
      else
        n
      end
    rescue ArgumentError
      problem("#{name} #{raw.inspect} is not a whole number (use 0 for automatic, or a count up to #{MAX_THREADS}); using automatic")
      0
    end

    # Names and absolute paths (realpaths where they resolve, as the scanner sees load-path
    # entries); a relative path is no name and no path: refused with a warning.
    def ignore_setting(keyword)
      raw = keyword || @env["LOADSCAN_IGNORE_DIRS"]&.split(File::PATH_SEPARATOR) || IGNORE_DEFAULT
      names = []
      paths = []
      Array(raw).map(&:to_s).map(&:strip).reject(&:empty?).each do |item|
        if item.start_with?("/")
          paths << ((File.realpath(item) rescue File.expand_path(item))) # rubocop:disable Style/RescueModifier
        elsif item.include?("/") || item == "." || item == ".."
          problem("#{keyword ? "ignore_dirs:" : "LOADSCAN_IGNORE_DIRS"} #{item.inspect} is neither a directory name " \
                  "nor an absolute path; not ignored")
        else
          names << item
        end
      end
      [names.uniq, paths.uniq]
    end

    # An absolute directory, or the default. An empty or relative setting would put the cache
    # wherever the program happens to run: refused (with a warning), never the cwd.
    def cache_dir_setting(keyword)
      raw = keyword || @env["LOADSCAN_CACHE_DIR"]
      return default_cache_dir if raw.nil?

      raw = raw.to_s
      return File.absolute_path(raw) if raw.start_with?("/")

      problem("#{keyword ? "cache_dir:" : "LOADSCAN_CACHE_DIR"} #{raw.inspect} is not an absolute path; using the default")
      default_cache_dir
    end

    # The app's tmp/cache/loadscan (which app: Loadscan::App). A program outside any app gets a
    # directory of its own in the user's cache dir ($XDG_CACHE_HOME, else ~/.cache), keyed by
    # the program's directory; with neither (HOME unset, empty, relative or `/`), no cache.
    def default_cache_dir
      callers = caller_locations.filter_map(&:absolute_path).reject { |p| p.start_with?(__dir__) }
      root = App.root(callers, env: @env)
      return File.join(root, "tmp", "cache", "loadscan") if root

      user_cache_dir
    end

    def user_cache_dir
      base = @env["XDG_CACHE_HOME"].to_s
      unless base.start_with?("/")
        home = @env["HOME"].to_s
        # A user without a home (HOME unset or `/`, as daemons run) would get `/.cache`.
        return nil if !home.start_with?("/") || File.expand_path(home).delete("/").empty?

        base = File.join(home, ".cache")
      end
      return nil unless File.directory?(File.dirname(base)) && Native.respond_to?(:unseeded_hash)

      program = File.absolute_path(File.dirname($PROGRAM_NAME.to_s))
      File.join(base, "loadscan", "#{File.basename(program).gsub(/[^\w.-]/, "_")}-#{Native.unseeded_hash(program)}")
    end
  end
end
