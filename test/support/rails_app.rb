# frozen_string_literal: true

require_relative "bundler_app"
require_relative "rails_app/files"
require_relative "../../lib/loadscan/cli/installer"
require_relative "../../fixtures/rails_app"

module Loadscan
  module TestSupport
    # The Rails app the Rails tests boot on the Ruby running them: on Ruby 3.2 and newer (3.3 and
    # 3.4 here) the Rails 7.2 app `rails new` makes from Debian sid's stack (Fixtures::RailsApp,
    # which bin/setup-rails-gems installs), with Bootsnap as the generator wires it where the
    # stack has it (3.3: Bootsnap 1.26.1) and loadscan set up by Loadscan::Installer (what
    # `loadscan install` writes); on Debian's 3.1, the Rails 6.1 app of BundlerApp (Debian
    # bookworm's gems). Rails 7.2 does not resolve there from Debian's archive: sid's
    # activestorage 7.2.4 asks for marcel >= 2, whose only package (sid's 2.1.0) needs Ruby 3.3.
    #
    # Either app is generated, given a few models, controllers and tests (RailsApp::Files),
    # locked offline and its databases prepared once per test run per Ruby (about 15 s); each
    # test gets a copy of it (`app`).
    module RailsApp
      VERSION = Fixtures::RailsApp::RAILS
      # Production's database on Rails 7.2 (the generated database.yml names none).
      PRODUCTION = Fixtures::RailsApp.production.freeze
      # What a stock boot adds to its environment: Bootsnap's load-path cache off, as loadscan/setup
      # turns it off where it is engaged (config/boot.rb requires it before bootsnap/setup), so
      # that the stock boot's `require` is Ruby's own beside the same compile cache.
      STOCK = { "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1" }.freeze
      # Ruby code for the boots' reports: whether Bootsnap's compile cache is on, i.e. has a cache
      # dir (Bootsnap 1.26 puts its InstructionSequence hook in place whenever it is loaded, set up or not).
      ISEQ_CACHE = "!!(defined?(Bootsnap::CompileCache::ISeq) && Bootsnap::CompileCache::ISeq.cache_dir)"

      module_function

      # Whether this Ruby runs the Rails 7.2 app: Debian sid's stack needs Ruby 3.2 (zeitwerk 2.8,
      # nokogiri 1.19, sqlite3 2.9, minitest 6).
      def rails72? = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2")

      # The Rails series this Ruby's app runs ("7.2", or Debian bookworm's "6.1").
      def series = rails72? ? VERSION[/\A\d+\.\d+/] : "6.1"

      # Whether this Ruby's stack has Bootsnap: sid's Bootsnap 1.26.1 is built for Ruby 3.3's
      # ABI; Debian's Ruby has bookworm's (1.13). Elsewhere the app is made with --skip-bootsnap.
      def bootsnap_stack? = rails72? ? RbConfig::CONFIG["ruby_version"] == "3.3.0" : BundlerApp.debian_ruby?

      # Why this Ruby has no Rails app here, or nil when it has one.
      def no_rails = rails72? ? Fixtures::RailsApp.missing : BundlerApp.no_rails

      # What the app's processes get on top of BundlerApp.env: on Rails 7.2 its GEM_PATH (this
      # Ruby's native gems, Ruby's own gems, sid's pure-Ruby ones) in place of Debian's gems, and
      # nio4r pure. Development's database is the generated one; production's is PRODUCTION.
      def env_overrides
        return {} unless rails72?

        Fixtures::RailsApp.env(ROOT).slice("GEM_PATH", "NIO4R_PURE", "NOKOGIRI_USE_SYSTEM_LIBRARIES")
      end

      def env(app) = BundlerApp.env(app).merge(env_overrides)

      # The environment of production's boots.
      def production = rails72? ? PRODUCTION : { "RAILS_ENV" => "production" }

      # BundlerApp.boot with this app's environment.
      def boot(app, cmd, env: {}, **opts) = BundlerApp.boot(app, cmd, env: env_overrides.merge(env), **opts)

      # A copy of this Ruby's test app in dir/railsapp (nil where there is none): each test that
      # boots it writes its own log/, tmp/ and databases.
      def app(dir)
        return nil if no_rails

        FileUtils.cp_r(template, File.join(dir, "railsapp"), preserve: true)
        File.join(dir, "railsapp")
      end

      # The app as `rails new` generates it (nil where this Ruby has none), in dir/railsapp; on
      # Rails 7.2 with its Dockerfile when `docker: true`.
      def rails_new(dir, docker: false)
        return nil if no_rails
        return BundlerApp.rails_new(dir) unless rails72?

        Fixtures::RailsApp.rails_new(File.join(dir, "railsapp"), docker: docker)
      end

      # The app every copy is made from: generated once per run, removed after it.
      def template
        @template ||= begin
          dir = File.realpath(Dir.mktmpdir("loadscan-rails#{series.delete(".")}"))
          Minitest.after_run { FileUtils.rm_rf(dir) }
          rails72? ? prepare(Fixtures::RailsApp.generate(out: File.join(dir, "railsapp"))[:root]) : prepare61(BundlerApp.rails_app(dir))
        end
      end

      # Rails 7.2's parallel testing calls Minitest.run_one_method, which minitest 6 (sid's, that
      # Debian's activesupport 7.2.4 accepts) no longer has: its forked workers die and `bin/rails
      # test` waits for them for ever. The app's tests take the minitest 5 Ruby bundles, as a user
      # of this stack must.
      MINITEST_5 = %(gem "minitest", "~> 5.20" # Rails 7.2's parallel testing calls Minitest.run_one_method (gone in 6)\n)

      # Rails 7.2's app: loadscan in the Gemfile (from this checkout; the railtie, as `loadscan
      # install` adds it) and in config/boot.rb (`loadscan install`'s edit: the first line, set up
      # before Bundler from this checkout, a `path:` gem, and loadscan/setup; both left out when
      # LOADSCAN_TEST_STOCK is set), minitest 5; the app's own code and tests; the lock; the
      # development and production databases.
      def prepare(app)
        File.write(File.join(app, "Gemfile"), %(gem "loadscan", path: #{ROOT.inspect}, require: "loadscan/railtie"\n#{MINITEST_5}),
                   mode: "a")
        installer = Loadscan::Installer.new(app)
        installer.write(installer.changes)
        boot = File.join(app, "config", "boot.rb")
        installed = File.read(boot)
        line = Loadscan::Installer::Boot::LOADSCAN_SETUP
        raise "loadscan install wrote no #{line}:\n#{installed}" unless installed.include?("#{line}\n")

        first = Loadscan::Installer::Boot::FIRST_LINE
        raise "loadscan install wrote no first line:\n#{installed}" unless installed.include?("#{first}\n")

        stock = ' unless ENV["LOADSCAN_TEST_STOCK"]'
        File.write(boot, installed.sub("#{line}\n", "#{line}#{stock}\n").sub("#{first}\n", "#{first[/\A[^#]*[^#\s]/]}#{stock}\n"))
        Files.write(app, series)
        BundlerApp.bundle_lock(app, env_overrides)
        prepare_databases(app)
      end

      # Debian's Rails 6.1 app (BundlerApp.rails_app: loadscan set up as the README says, Bootsnap's
      # compile cache beside it when LOADSCAN_TEST_BOOTSNAP is set) with the same code and tests.
      def prepare61(app)
        Files.write(app, series)
        prepare_databases(app)
      end

      def prepare_databases(app)
        [{}, production].each { |db_env| rails!(app, "db:prepare", env: db_env) }
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

        # Where the stack has Bootsnap (RailsApp.bootsnap_stack?: the tests that need it are
        # defined there only), it must be installed.
        def bootsnap!
          return if RailsApp.rails72? ? Fixtures::RailsApp.bootsnap? : BundlerApp.gem?("bootsnap")

          flunk "Bootsnap is not installed for Ruby #{RUBY_VERSION}: run bin/setup"
        end
      end
    end
  end
end
