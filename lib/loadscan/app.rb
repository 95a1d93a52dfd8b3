# frozen_string_literal: true

module Loadscan
  # Which app a process works for, and so where the app's cache lives (tmp/cache/loadscan in
  # it): one rule for the boot (Config's default cache dir) and the command line, so that
  # `loadscan build`, `stats` and `clear` run in the app's directory use the cache its boots
  # use. The app is, first match wins:
  #
  # 1. the directory holding the `config/` whose file set loadscan up (config/boot.rb);
  # 2. Bundler's root, once Bundler is loaded (the Gemfile's directory);
  # 3. the directory of the Gemfile `bundler/setup` will load: BUNDLE_GEMFILE's;
  # 4. the nearest directory holding a `Gemfile`, `gems.rb` or `config/boot.rb`, from the current
  #    one upward (where Bundler looks for its Gemfile): `RUBYOPT=-rloadscan/setup`, set up before
  #    `bundler/setup` runs, and an app without a Gemfile are found this way. A marker counts
  #    only when it and its directory are owned by this user or root and writable by no one
  #    else (group-writable is fine: umask 002): a stray Gemfile in a shared directory (/tmp)
  #    is no one's app.
  #
  # None (nil): a program outside any app.
  module App
    GEMFILES = %w[Gemfile gems.rb].freeze
    MARKERS = [*GEMFILES, "config/boot.rb"].freeze

    module_function

    # The app's root directory, or nil. `callers`: the absolute paths of the files that led to
    # this call, innermost first (loadscan's own left out).
    def root(callers = [], env: ENV)
      from_config(callers) || bundler_root || bundle_gemfile(env)&.then { File.dirname(_1) } || nearest
    end

    # The Gemfile the app's boot sets Bundler up with (BUNDLE_GEMFILE, else the app's own), or nil.
    def gemfile(env: ENV)
      bundle_gemfile(env) || nearest&.then { |dir| GEMFILES.map { File.join(dir, _1) }.find { File.file?(_1) } }
    end

    def from_config(callers)
      config = callers.find { |path| path.include?("/config/") }
      config && config[0, config.rindex("/config/")]
    end

    def bundler_root
      return unless defined?(Bundler) && Bundler.respond_to?(:root)

      Bundler.root.to_s
    rescue StandardError, LoadError # no Gemfile: Bundler::GemfileNotFound
      nil
    end

    def bundle_gemfile(env)
      path = env["BUNDLE_GEMFILE"].to_s
      File.expand_path(path) unless path.empty?
    end

    # The nearest directory at or above the current one that holds one of MARKERS.
    def nearest
      dir = Dir.pwd
      loop do
        return dir if MARKERS.any? { trusted_marker?(dir, _1) }

        parent = File.dirname(dir)
        return nil if parent == dir

        dir = parent
      end
    rescue SystemCallError # the current directory was removed
      nil
    end

    # Whether `rel` in `dir` is a regular file that it, and each directory from it up to `dir`,
    # is owned by this user or root and not writable by others.
    def trusted_marker?(dir, rel)
      path = File.join(dir, rel)
      return false unless File.file?(path)

      [path, *rel.count("/").downto(0).map { |n| File.join(dir, *rel.split("/").first(n)) }].uniq.all? do |p|
        stat = File.stat(p)
        [Process.euid, 0].include?(stat.uid) && (stat.mode & 0o002).zero?
      end
    rescue SystemCallError
      false
    end
  end
end
