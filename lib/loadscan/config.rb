# frozen_string_literal: true

module Loadscan
  # Settings, from keywords to `Loadscan.setup` or else LOADSCAN_* environment variables:
  #
  #   LOADSCAN_DISABLE=1          leave require alone (setup does nothing)
  #   LOADSCAN_CACHE_DIR=DIR      where the cache lives (default: tmp/cache/loadscan in the app)
  #   LOADSCAN_CACHE=0            no cache: scan on every boot
  #   LOADSCAN_VALIDATE=listing   check the app's dirs by their entry names, not mtimes, so a
  #                               cache survives a fresh `git checkout` (CI workers)
  #   LOADSCAN_READONLY=1         use the cache, never write it (CI workers sharing one)
  #   LOADSCAN_THREADS=N          scanner threads (default: the CPU count, at most 8)
  #   LOADSCAN_LAZY=0             list every directory of every entry up front instead of only
  #                               the entries' own, and the rest as requires reach them (entries
  #                               served from a cache that a lazy boot wrote keep their deferred
  #                               directories, listed whole when first needed)
  #   LOADSCAN_STABLE_DIRS=A:B    more directories holding installed, never-edited code (besides
  #                               Gem.path, Bundler's path and Ruby's own), checked with one stat
  #                               per load-path entry instead of one per directory
  class Config
    attr_reader :enabled, :threads, :dlext, :cache_dir, :validate, :readonly, :lazy

    VALIDATIONS = %w[mtime listing].freeze

    def initialize(enabled: nil, threads: nil, cache_dir: nil, cache: nil, validate: nil, readonly: nil,
                   stable_dirs: nil, lazy: nil, env: ENV)
      @extra_stable = stable_dirs || env["LOADSCAN_STABLE_DIRS"].to_s.split(File::PATH_SEPARATOR)
      @enabled = enabled.nil? ? !flag?(env["LOADSCAN_DISABLE"]) : enabled
      @threads = integer(threads || env["LOADSCAN_THREADS"] || 0, "threads")
      raise ConfigError, "threads must be 0 (automatic) or more, got #{@threads}" if @threads.negative?

      cache = cache.nil? ? env["LOADSCAN_CACHE"].nil? || flag?(env["LOADSCAN_CACHE"]) : cache
      @cache_dir = cache ? File.expand_path(cache_dir || env["LOADSCAN_CACHE_DIR"] || default_cache_dir) : nil
      @validate = (validate || env["LOADSCAN_VALIDATE"] || "mtime").to_s
      raise ConfigError, "LOADSCAN_VALIDATE must be one of #{VALIDATIONS.join(", ")}, got #{@validate.inspect}" unless VALIDATIONS.include?(@validate)

      @readonly = readonly.nil? ? flag?(env["LOADSCAN_READONLY"]) : readonly
      @lazy = lazy.nil? ? env["LOADSCAN_LAZY"].nil? || flag?(env["LOADSCAN_LAZY"]) : lazy
      # RbConfig is loaded whenever RubyGems is; without it the extension's own default applies.
      @dlext = defined?(RbConfig) ? RbConfig::CONFIG["DLEXT"] : ""
    end

    # The key a cache file must carry: written by another loadscan or Ruby, it is not used.
    def env_key
      "loadscan #{VERSION} #{RUBY_REVISION} #{RUBY_PLATFORM} #{dlext}"
    end

    # Directories whose contents only change on install (gems, Ruby's own libraries): cached
    # entries under them are checked with one stat of the entry instead of every directory.
    def stable_dirs
      dirs = @extra_stable.dup
      dirs.concat(Gem.path) if defined?(Gem) && Gem.respond_to?(:path)
      dirs << Bundler.bundle_path.to_s if defined?(Bundler) && Bundler.respond_to?(:bundle_path) && (Bundler.bundle_path rescue nil) # rubocop:disable Style/RescueModifier
      if defined?(RbConfig)
        dirs.concat(RbConfig::CONFIG.values_at("rubylibprefix", "rubyarchprefix", "rubylibdir", "rubyarchdir",
                                               "sitelibdir", "sitearchdir", "vendorlibdir", "vendorarchdir").compact)
      end
      dirs.reject(&:empty?).filter_map { |d| File.realpath(d) rescue nil }.uniq # rubocop:disable Style/RescueModifier
    end

    private

    # The app root: the directory holding the `config/` that required loadscan (as in
    # config/boot.rb), else Bundler's root, else the current directory.
    def default_cache_dir
      config = caller_locations.map(&:absolute_path).compact.find { |p| p.include?("/config/") && !p.start_with?(__dir__) }
      root = if config
               config[0, config.rindex("/config/")]
             elsif defined?(Bundler) && Bundler.respond_to?(:root)
               (Bundler.root.to_s rescue nil) # rubocop:disable Style/RescueModifier
             end
      File.join(root || Dir.pwd, "tmp", "cache", "loadscan")
    end

    def integer(value, name)
      Integer(value)
    rescue ArgumentError, TypeError
      raise ConfigError, "#{name} must be a whole number, got #{value.inspect}"
    end

    def flag?(value)
      !value.nil? && !value.empty? && !%w[0 false no off].include?(value.downcase)
    end
  end
end
