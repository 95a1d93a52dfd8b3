# frozen_string_literal: true

require_relative "ruby_process"
require_relative "../../fixtures/rails_app"
require "rbconfig"
require "tmpdir"
require "fileutils"

module Loadscan
  module TestSupport
    # Real Bundler apps, made the way a user makes one: a Gemfile naming installed gems and
    # loadscan itself (`gem "loadscan", path: …`), a Gemfile.lock from `bundle lock --local`
    # (rubygems.org is not reachable here), and boots through `bundler/setup`, `bundle exec` or
    # a generated Rails app's `bin/rails`, run with RubyProcess (which can run them under strace, to
    # count the `openat` calls that failed).
    module BundlerApp
      RUBY = RbConfig.ruby
      BINDIR = RbConfig::CONFIG["bindir"]
      # Debian's gems belong to Ruby 3.1; another Ruby sees its own gems, plus Debian's
      # pure-Ruby ones when they are put on GEM_PATH (shared/rubies/README.md).
      DEBIAN_GEMS = "/usr/share/rubygems-integration/all"

      # Gems every Ruby here has (pure Ruby), and native ones Debian built for its own Ruby (and
      # bin/setup-rails-gems for the others).
      COMMON_GEMS = %w[activesupport rack thor rake builder erubi i18n tzinfo].freeze
      NATIVE_GEMS = %w[nokogiri sqlite3].freeze
      # What those gems require (ActiveSupport 6.1) that Ruby 3.4 moved out of its default gems:
      # under Bundler they load only when the Gemfile names them, so there the apps' Gemfiles do,
      # as a user's must (shared/rubies/README.md). 3.4 has them as bundled gems.
      UNBUNDLED_IN_34 = %w[base64 bigdecimal mutex_m drb].freeze
      # And what 4.0 moved out (bin/setup installs them into a Ruby built without its bundled gems).
      UNBUNDLED_IN_40 = %w[logger benchmark ostruct].freeze
      # What bin/setup-rails-gems built for this Ruby (a GEM_HOME per Ruby; `.complete` when done).
      BUILT_GEMS = File.join(ENV["LOADSCAN_GEM_CACHE"] || File.join(ENV["XDG_CACHE_HOME"] || File.join(Dir.home, ".cache"),
                                                                     "loadscan", "rails-gems"),
                             File.basename(RbConfig::CONFIG["prefix"]))

      module_function

      # Debian's own Ruby sees Debian's gems (pure and native) without help.
      def debian_ruby?
        Gem.default_path.include?(DEBIAN_GEMS)
      end

      def built_gems?
        File.file?(File.join(BUILT_GEMS, ".complete"))
      end

      # A Ruby bin/setup-rails-gems builds for (/opt/rubies/ruby-X.Y.Z): there, Rails tests that
      # find no gems fail rather than skip.
      def built_gems_expected?
        RbConfig::CONFIG["prefix"].match?(%r{\A/opt/rubies/ruby-[0-9.]+\z})
      end

      # Whether this Ruby's processes see `name` (Debian's for Debian's Ruby, else one built here).
      def gem?(name)
        return Gem::Specification.find_all_by_name(name).any? if debian_ruby?

        built_gems? && !Dir[File.join(BUILT_GEMS, "specifications", "#{name}-[0-9]*.gemspec")].empty?
      end

      # Why this Ruby has no Rails 6.1 app here (Debian's Ruby only: other Rubies boot Rails 7.2,
      # test/support/rails_app.rb), or nil when it has one.
      def no_rails
        return "Debian's Rails 6.1 is for Debian's Ruby only" unless debian_ruby?

        "Debian's rails is not installed" unless gem?("rails")
      end

      # What every process of an app needs in its environment: this Ruby's tools first on PATH,
      # and on a non-Debian Ruby, gem_path as GEM_PATH. The lock has no CHECKSUMS section (Bundler 4
      # writes one by default, with empty entries for gems installed without their .gem file, as all
      # of these are, which frozen mode rejects).
      def env(app)
        env = { "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "PATH" => "#{BINDIR}:#{ENV.fetch("PATH")}",
                "RUBYOPT" => nil, "RUBYLIB" => nil, "BUNDLE_FROZEN" => "true", "BUNDLE_APP_CONFIG" => File.join(app, ".bundle"),
                "BUNDLE_LOCKFILE_CHECKSUMS" => "false" }
        env["GEM_PATH"] = gem_path.join(File::PATH_SEPARATOR) unless debian_ruby?
        env
      end

      # A non-Debian Ruby's gem dirs: its own, then the Rails stack bin/setup-rails-gems made for
      # it (its native gems, nokogiri 1.19 and sqlite3 among them, and sid's pure-Ruby gems,
      # which nokogiri's mini_portile2 comes from: Fixtures::RailsApp), or without it Debian
      # 12's pure-Ruby gems.
      def gem_path = built_gems? ? [Gem.default_dir, BUILT_GEMS, Fixtures::RailsApp.pure] : [Gem.default_dir, DEBIAN_GEMS]

      def gems
        debian_ruby? || built_gems? ? COMMON_GEMS + NATIVE_GEMS : COMMON_GEMS
      end

      # The Rails 6.1 app's Gemfile: a generated one's gems, all Debian's.
      def rails_gems = %w[rails sqlite3 puma listen bootsnap]

      def unbundled_gems
        version = Gem::Version.new(RUBY_VERSION)
        (version >= Gem::Version.new("3.4") ? UNBUNDLED_IN_34 : []) + (version >= Gem::Version.new("4.0") ? UNBUNDLED_IN_40 : [])
      end

      # Writes a Gemfile (`gems`, those this Ruby unbundled, plus loadscan from this checkout, as
      # the README's Gemfile line says, or with `installed: true` the loadscan gem installed where
      # `extra_env`'s GEM_PATH says) and locks it offline.
      # A Rails app requires loadscan's railtie (rake tasks), as the README says.
      def lock(app, gems, require_as: false, installed: false, extra_env: {}, bundle: [File.join(BINDIR, "bundle")])
        File.write(File.join(app, "Gemfile"), <<~RUBY)
          source "https://rubygems.org"
          #{(gems | unbundled_gems).map { |g| "gem #{g.inspect}" }.join("\n")}
          gem "loadscan", #{installed ? "" : "path: #{ROOT.inspect}, "}require: #{require_as.inspect}
        RUBY
        bundle_lock(app, extra_env, bundle: bundle)
      end

      # A Gemfile naming no gem, locked: Bundler sets up nothing but itself.
      def empty_bundle(app)
        File.write(File.join(app, "Gemfile"), "source \"https://rubygems.org\"\n")
        bundle_lock(app)
      end

      # `bundle lock --local` of the app's Gemfile (`extra_env` as for `lock`; `bundle`: the
      # command, another Ruby's under qemu for the aarch64 gem).
      def bundle_lock(app, extra_env = {}, bundle: [File.join(BINDIR, "bundle")])
        run = RubyProcess.run_ruby(command: [*bundle, "lock", "--local"],
                                   env: env(app).merge("BUNDLE_FROZEN" => nil).merge(extra_env), chdir: app, timeout: 600)
        raise "bundle lock --local failed in #{app}:\n#{run.stdout}#{run.stderr}" unless run.success?
      end

      # A plain Bundler app whose boot.rb does what config/boot.rb + config/application.rb do:
      # set up Bundler (or not, when `bundle exec` / `-rbundler/setup` already did), set up
      # loadscan (unless LOADSCAN_TEST_STOCK), then `require "active_support/all"`,
      # `Bundler.require`, and a few requires stock apps make (an optional one that is missing).
      # Where loadscan/setup goes is BOOT_ORDER: "after" (the README's way), "before" (by
      # absolute path, ahead of Bundler) or "none" (the caller set Bundler up). BOOT_EARLY is
      # loaded first, BOOT_PRELUDE after both setups.
      # (`installed:`, `extra_env:` and `bundle:` as for `lock`; `gems:` those the Ruby booting it has.)
      def plain_app(dir, installed: false, extra_env: {}, gems: self.gems, bundle: [File.join(BINDIR, "bundle")])
        app = File.join(dir, "plain")
        FileUtils.mkdir_p(app)
        lock(app, gems, installed: installed, extra_env: extra_env, bundle: bundle)
        File.write(File.join(app, "boot.rb"), <<~RUBY)
          load ENV["BOOT_EARLY"] if ENV["BOOT_EARLY"]
          order = ENV.fetch("BOOT_ORDER")
          stock = ENV["LOADSCAN_TEST_STOCK"]
          require #{File.join(LIB, "loadscan/setup").inspect} if order == "before" && !stock
          require "bundler/setup" unless order == "none"
          require "loadscan/setup" unless order == "before" || stock
          load ENV["BOOT_PRELUDE"] if ENV["BOOT_PRELUDE"]
          results = []
          try = lambda do |f|
            results << [f, require(f)]
          rescue LoadError => e
            results << [f, e.class.name, e.message, e.path]
          end
          %w[active_support/all set json].each(&try)
          Bundler.require
          %w[rack/builder thor/group no/such/optional_gem set.rb json].each(&try)
          #{REPORT}
        RUBY
        app
      end

      # `rails new --minimal` (Debian's Rails 6.1, offline; nil when `no_rails`), its Gemfile reduced
      # to what is installed (rails_gems), plus `gem "loadscan", path: …`, and
      # `require "loadscan/setup"` in config/boot.rb after `require "bundler/setup"`, as the README says.
      def rails_app(dir)
        app = rails_new(dir) or return nil
        lock(app, rails_gems, require_as: "loadscan/railtie")
        boot = File.join(app, "config", "boot.rb")
        # loadscan as the README says; Bootsnap's compile cache beside it when LOADSCAN_TEST_BOOTSNAP
        # is set (README, "Coming from Bootsnap"), in the stock boot too.
        File.write(boot, File.read(boot).sub(%(require "bundler/setup"), <<~RUBY.chomp))
          require "bundler/setup"
          require "loadscan/setup" unless ENV["LOADSCAN_TEST_STOCK"]
          if ENV["LOADSCAN_TEST_BOOTSNAP"]
            require "bootsnap"
            Bootsnap.setup(cache_dir: ENV.fetch("LOADSCAN_TEST_BOOTSNAP"), load_path_cache: false,
                           compile_cache_iseq: true, compile_cache_yaml: true)
          end
        RUBY
        app
      end

      # `rails new --minimal --skip-bundle` (Debian's Rails, offline) in dir/railsapp, as generated;
      # nil where this Ruby has no Rails.
      def rails_new(dir)
        return nil if no_rails

        # railties' `rails` executable, as its binstub runs it (other Rubies have no binstub).
        rails = [RUBY, "-e", 'load Gem.bin_path("railties", "rails")', "--"]
        run = RubyProcess.run_ruby(command: rails + %w[new railsapp --minimal --skip-bundle --skip-git
                                                       --skip-javascript --skip-webpack-install],
                                   env: env(dir).merge("BUNDLE_GEMFILE" => nil), chdir: dir, timeout: 600)
        raise "rails new failed:\n#{run.stdout}#{run.stderr}" unless run.success?

        File.join(dir, "railsapp")
      end

      # What each boot reports (Marshal'd to LOADSCAN_TEST_REPORT).
      REPORT = <<~RUBY
        File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
          "loaded_features" => $LOADED_FEATURES.dup,
          "load_path" => $LOAD_PATH.map(&:to_s),
          "results" => (defined?(results) ? results : nil),
          "stats" => (defined?(Loadscan) && Loadscan.respond_to?(:stats) ? Loadscan.stats : nil),
        ))
      RUBY

      # Runs `cmd` in `app` with RubyProcess (stock when `loadscan: false`: the boots above read
      # LOADSCAN_TEST_STOCK) and returns its Result (report, stderr, and with strace how many
      # openat calls failed).
      def boot(app, cmd, loadscan: true, env: {}, strace: false)
        run = RubyProcess.run_ruby(command: cmd, loadscan: loadscan, env: env(app).merge(env), chdir: app, strace: strace,
                                   timeout: 600)
        raise "#{cmd.join(" ")} failed in #{app}:\n#{run.stderr}" unless run.success?
        raise "#{cmd.join(" ")} reported nothing in #{app}:\n#{run.stderr}" unless run.report

        run
      end
    end
  end
end
