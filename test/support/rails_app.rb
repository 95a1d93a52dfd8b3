# frozen_string_literal: true

require_relative "bundler_app"
require_relative "rails_app/files"
require_relative "../../lib/loadscan/installer"
require_relative "../../fixtures/rails_app"

module Loadscan
  module TestSupport
    # The Rails app the Rails tests boot on the Ruby running them: on Ruby 3.2 and newer (3.3 and
    # 3.4 here) a Rails 8.1 app made by `rails _8.1.3.1_ new` from the gem set bin/setup-rails-gems
    # installs (../shared/gems/README.md), with Bootsnap as the generator wires it and loadscan set
    # up by Loadscan::Installer (what `loadscan install` writes); on Debian's 3.1, the Rails 6.1 app
    # of BundlerApp (Debian's gems), while 3.1 is in the matrix.
    #
    # The Rails 8.1 app is generated, given a few models, controllers and tests (RailsApp::Files),
    # locked offline and its databases prepared once per test run per Ruby (about 10 s); each test
    # gets a copy of it (`app`).
    module RailsApp
      VERSION = Fixtures::RailsApp::RAILS
      # The README's flags: `--minimal`'s skips, less --skip-bootsnap (which --minimal implies).
      NEW_FLAGS = Fixtures::RailsApp::SKIPS
      # The gem set (its SHA256SUMS), and where bin/setup-rails-gems installed it for this Ruby
      # (`.complete` holds the SHA256SUMS it was installed from).
      GEM_SET = File.expand_path("../shared/gems", ROOT)
      GEMS = Fixtures::RailsApp.home
      # Production's database (the generated database.yml names none: no Kamal, no Solid).
      PRODUCTION = { "RAILS_ENV" => "production", "DATABASE_URL" => Fixtures::RailsApp::PRODUCTION_DB }.freeze

      module_function

      # Whether this Ruby runs the Rails 8.1 app (Rails 8.1 needs Ruby 3.2).
      def rails81? = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2")

      # Why this Ruby has no Rails app here, or nil when it has one.
      def no_rails
        return BundlerApp.no_rails unless rails81?
        return "no Rails #{VERSION} gem set for Ruby #{RUBY_VERSION} in #{GEMS} (bin/setup installs it)" unless File.file?(complete)

        sums = File.join(GEM_SET, "SHA256SUMS")
        return nil if !File.file?(sums) || File.read(complete) == File.read(sums).sub(/\n+\z/, "") # as $(cat) reads it

        "the Rails #{VERSION} gem set in #{GEMS} is not the one in #{GEM_SET} (bin/setup installs it again)"
      end

      def complete = File.join(GEMS, ".complete")

      # What the app's processes get on top of BundlerApp.env: the gem set, Ruby's own gems (its
      # default and bundled gems) and sqlite3 on GEM_PATH, in place of Debian's gems.
      def env_overrides = rails81? ? { "GEM_PATH" => gem_path.join(File::PATH_SEPARATOR) } : {}

      def gem_path = Fixtures::RailsApp.gem_dirs

      def env(app) = BundlerApp.env(app).merge(env_overrides)

      # BundlerApp.boot with this app's environment.
      def boot(app, cmd, env: {}, **opts) = BundlerApp.boot(app, cmd, env: env_overrides.merge(env), **opts)

      # A copy of this Ruby's test app in dir/railsapp (nil where there is none): each test that
      # boots it writes its own log/, tmp/ and databases.
      def app(dir)
        return BundlerApp.rails_app(dir) unless rails81?
        return nil if no_rails

        FileUtils.cp_r(template, File.join(dir, "railsapp"), preserve: true)
        File.join(dir, "railsapp")
      end

      # The app as `rails new` generates it (nil where this Ruby has none), in dir/railsapp; on
      # Rails 8.1 with its Dockerfile when `docker: true`.
      def rails_new(dir, docker: false)
        return BundlerApp.rails_new(dir) unless rails81?
        return nil if no_rails

        # The gem set's `rails` binstub, which picks the version named as `_X_`.
        rails = [RbConfig.ruby, File.join(GEMS, "bin", "rails"), "_#{VERSION}_"]
        flags = docker ? NEW_FLAGS - %w[--skip-docker] : NEW_FLAGS
        run = RubyProcess.run_ruby(command: rails + ["new", "railsapp", *flags], env: env(dir).merge("BUNDLE_GEMFILE" => nil),
                                   chdir: dir, timeout: 600)
        raise "rails new failed:\n#{run.stdout}#{run.stderr}" unless run.success?

        File.join(dir, "railsapp")
      end

      # The Rails 8.1 app every copy is made from: generated once per run, removed after it.
      def template
        @template ||= begin
          dir = File.realpath(Dir.mktmpdir("loadscan-rails81"))
          Minitest.after_run { FileUtils.rm_rf(dir) }
          prepare(rails_new(dir))
        end
      end

      # loadscan in the Gemfile (from this checkout; the railtie, as `loadscan install` adds it)
      # and in config/boot.rb (`loadscan install`'s edit, left out when LOADSCAN_TEST_STOCK is set);
      # the app's own code and tests; the lock; the development and production databases.
      def prepare(app)
        File.write(File.join(app, "Gemfile"), %(gem "loadscan", path: #{ROOT.inspect}, require: "loadscan/railtie"\n), mode: "a")
        installer = Loadscan::Installer.new(app)
        installer.write(installer.changes)
        boot = File.join(app, "config", "boot.rb")
        installed = File.read(boot)
        line = Loadscan::Installer::Boot::LOADSCAN_SETUP
        raise "loadscan install wrote no #{line}:\n#{installed}" unless installed.include?("#{line}\n")

        File.write(boot, installed.sub("#{line}\n", %(#{line} unless ENV["LOADSCAN_TEST_STOCK"]\n)))
        Files.write(app)
        BundlerApp.bundle_lock(app, env_overrides)
        [{}, PRODUCTION].each { |db_env| rails!(app, "db:prepare", env: db_env) }
        FileUtils.rm_rf(File.join(app, "tmp", "cache", "bootsnap")) # a copy starts with no compile cache
        app
      end

      # `bin/rails *args` in the app, stock; raises unless it succeeds. Returns its Result.
      def rails!(app, *args, env: {}, loadscan: false, timeout: 600)
        run = RubyProcess.run_ruby(command: [RbConfig.ruby, "bin/rails", *args], loadscan: loadscan, env: env(app).merge(env),
                                   chdir: app, timeout: timeout)
        raise "bin/rails #{args.join(" ")} failed in #{app}:\n#{run.stdout}#{run.stderr}" unless run.success?

        run
      end

      # For the tests that boot the Rails app. Where this Ruby has none, they fail on a Ruby that
      # bin/setup provides one for (so bin/test cannot pass by skipping), and skip elsewhere.
      module NeedsRails
        def rails_app!(app)
          return app if app

          reason = RailsApp.no_rails
          flunk "#{reason}: run bin/setup" if BundlerApp.debian_ruby? || BundlerApp.built_gems_expected?
          skip reason
        end

        # Rails 8.1's gem set has Bootsnap; Debian's Ruby has Debian's.
        def bootsnap!
          return if RailsApp.rails81? || BundlerApp.gem?("bootsnap")

          flunk "Debian's bootsnap is not installed: run bin/setup" if BundlerApp.debian_ruby?
          skip "no Bootsnap for Ruby #{RUBY_VERSION}"
        end

        # What only the Rails 8.1 app has (forked test workers, Puma in cluster mode).
        def rails81!
          skip "Rails #{VERSION} needs Ruby 3.2: on #{RUBY_VERSION}, Debian's Rails 6.1 is booted" unless RailsApp.rails81?
        end
      end
    end
  end
end
