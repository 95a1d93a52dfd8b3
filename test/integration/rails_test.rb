# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/rails_app"
require_relative "../support/rails_app/server"

# A real Rails app booted the ways people boot one, each boot against the same boot without
# loadscan (LOADSCAN_TEST_STOCK) in a separate process: on Ruby 3.3 and 3.4 a `rails new` Rails
# 7.2 app from Debian sid's stack, with Bootsnap 1.26.1 as the generator wires it on 3.3 and
# loadscan as `loadscan install` sets it up (test/support/rails_app.rb), on Debian's 3.1 its
# Rails 6.1 app. `bin/rails runner` in development and in production (eager loading), Bootsnap's
# compile cache beside loadscan where the stack has Bootsnap, the app's own tests in 2 forked
# workers and Puma in cluster mode.
class RailsTest < Minitest::Test
  RailsApp = Loadscan::TestSupport::RailsApp
  include RailsApp::NeedsRails

  # What a runner boot reports: what it loaded; Rails' version and environment, and whether it
  # eager loaded; whether Bootsnap's load-path cache and its compile cache are on; loadscan's figures.
  REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "loaded_features" => $LOADED_FEATURES.dup, "rails" => [Rails.version, Rails.env.to_s, Rails.application.config.eager_load],
      "bootsnap" => defined?(Bootsnap) ? [Bootsnap::LoadPathCache.enabled?, #{RailsApp::ISEQ_CACHE}] : nil,
      "stats" => (Loadscan.stats if defined?(Loadscan.active?) && Loadscan.active?)))
  RUBY
  RUNNER = [RbConfig.ruby, "bin/rails", "runner", REPORT].freeze
  SECRET = { "SECRET_KEY_BASE" => "x" * 64 }.freeze

  # One copy of the app for the tests that only boot it (each boot has its own loadscan cache).
  def self.shared_app
    @shared_app ||= begin
      dir = File.realpath(Dir.mktmpdir("loadscan-rails"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      RailsApp.app(dir)
    end
  end

  def app = rails_app!(self.class.shared_app)

  def test_runner_in_development
    stock, = assert_runner_like_stock(app, {})
    assert_equal ["development", false], stock.report["rails"].values_at(1, 2)
    assert_equal RailsApp.series, stock.report["rails"][0][/\A\d+\.\d+/]
    refute_includes stock.loaded_features, File.join(app, "app/models/widget.rb"), "development loads the app lazily"
  end

  # Production eager loads the app (config.eager_load): every file under app/ and lib/ loaded.
  def test_runner_in_production
    stock, = assert_runner_like_stock(app, production)
    assert_equal ["production", true], stock.report["rails"].values_at(1, 2)
    ["app/models/widget.rb", "app/controllers/probe_controller.rb", RailsApp::Files.probe_path(RailsApp.series)].each do |file|
      assert_includes stock.loaded_features, File.join(app, file)
    end
  end

  # The README's migration from Bootsnap: its compile cache beside loadscan (on Rails 7.2 with
  # Bootsnap 1.26.1 as `loadscan install` writes it; on 6.1 with Debian's 1.13 set up the same way
  # by LOADSCAN_TEST_BOOTSNAP). loadscan's caches answer (its compile cache in front of
  # Bootsnap's, which stays empty), the load-path cache is off, and the boot is stock's with the same
  # Bootsnap setup. Defined where the stack has Bootsnap: 3.3 and Debian's 3.1 (3.4's app is
  # made with --skip-bootsnap).
  if RailsApp.bootsnap_stack?
    def test_bootsnaps_compile_cache_beside_loadscan
      bootsnap!
      # Rails 7.2's compile cache is the app's tmp/cache/bootsnap: a copy of its own starts empty.
      with_own_app("loadscan-bootsnap", shared: !RailsApp.rails72?) do |app, tmp|
        bootsnap = RailsApp.rails72? ? File.join(app, "tmp", "cache", "bootsnap") : File.join(tmp, "bootsnap")
        env = SECRET.merge(production)
        env["LOADSCAN_TEST_BOOTSNAP"] = bootsnap unless RailsApp.rails72?
        assert_equal 0, Dir[File.join(bootsnap, "**", "*")].size, "a fresh copy has no compile cache"
        cache = File.join(tmp, "loadscan-cache")
        RailsApp.boot(app, RUNNER, env: env.merge("LOADSCAN_CACHE_DIR" => cache)) # both caches cold
        # loadscan's compile cache answers in front of Bootsnap's (whose YAML cache is its own).
        assert_operator Dir[File.join(cache, "iseq.bin")].size, :==, 1, "loadscan's compile cache was filled"
        assert_empty Dir[File.join(bootsnap, "**", "*iseq*", "**", "*")].select { |f| File.file?(f) }, "Bootsnap's iseq cache was not used"
        warm = RailsApp.boot(app, RUNNER, env: env.merge("LOADSCAN_CACHE_DIR" => cache))
        stock = RailsApp.boot(app, RUNNER, loadscan: false, env: env.merge(RailsApp::STOCK))
        assert_same_run stock, warm, "rails + bootsnap", only: %w[rails bootsnap]
        assert_equal [false, true], warm.report["bootsnap"], "Bootsnap: load-path cache, compile cache"
        assert_answered warm.report["stats"], stock.loaded_features.size, "rails + bootsnap"
        assert_operator warm.report["stats"][:roots_from_cache], :>, 0, "loadscan's cache was used"
      end
    end
  end

  # `bin/rails test` of the app's own tests, `parallelize(workers: 2)`: each forked worker
  # reports WorkerProbe (its pid, its parent's, and its first require of a feature), stock and
  # with loadscan. Both runs pass the same tests; with loadscan each worker is engaged and
  # answers that require from the index it inherited, loading the file stock loads.
  def test_the_apps_tests_in_forked_workers
    with_own_app("loadscan-rails-test") do |app, tmp|
      stock, ours = [false, true].map do |loadscan|
        # A fresh copy in the same place for the second run: the first leaves test databases
        # that would spare it their setup.
        if loadscan
          FileUtils.rm_rf(app)
          app = rails_app!(RailsApp.app(tmp))
        end
        workers = FileUtils.mkdir_p(File.join(tmp, "workers-#{loadscan}")).first
        run = run_ruby(command: [RbConfig.ruby, "bin/rails", "test"], loadscan: loadscan, chdir: app, timeout: 300,
                       env: RailsApp.env(app).merge("LOADSCAN_TEST_WORKERS" => workers).merge(loadscan ? {} : RailsApp::STOCK))
        assert run.success?, "bin/rails test (loadscan: #{loadscan}) failed:\n#{run.stdout}#{run.stderr}"
        # (Rails 7 says so; 6.1 forks as many silently.)
        assert_includes run.stdout, "Running 4 tests in parallel using 2 processes" if RailsApp.rails72?
        [run, Dir[File.join(workers, "worker-*")].sort.map { |f| Marshal.load(File.binread(f)) }] # rubocop:disable Security/MarshalLoad
      end
      assert_equal stock[0].stdout[/^\d+ runs, .*$/], ours[0].stdout[/^\d+ runs, .*$/]
      assert_match(/^4 runs, \d+ assertions, 0 failures, 0 errors, 0 skips$/, ours[0].stdout)
      assert_empty ours[0].stderr.lines.grep(/^loadscan: /), ours[0].stderr
      [stock, ours].each { |(_, probes)| assert_forked_workers(probes, 2) }
      assert_workers_answered_from_the_index(stock[1], ours[1])
    end
  end

  # `bin/rails server`: Puma, 2 workers forked from a master that preloaded the app. Each worker
  # answers a request, stock and with loadscan; with loadscan each is engaged, answers its first
  # require of a feature from the index it inherited and has loaded what a stock worker has; the
  # cache is written once, by the master, at its exit.
  def test_puma_in_cluster_mode
    with_own_app("loadscan-rails-server") do |app, tmp|
      server = RailsApp::Server.new(app, tmp)
      stock = server.run(loadscan: false, env: RailsApp::STOCK)
      cache = File.join(tmp, "loadscan-cache")
      ours = server.run(loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache }, trace: true)
      [stock, ours].each do |run|
        assert_forked_workers(run.answers.values, 2, master: run.master)
        assert run.status.success? || run.status.termsig == Signal.list["TERM"], "server: #{run.status.inspect}\n#{run.log}"
      end
      assert_workers_answered_from_the_index(stock.answers.values, ours.answers.values)
      refute_match(/^loadscan: /, ours.log)
      assert_cache_written_once_by(ours.master, ours.trace, cache)
    end
  end

  private

  def production = RailsApp.production

  # A copy of the app of its own (the shared one with `shared: true`), and a temp dir, removed after.
  def with_own_app(name, shared: false)
    Dir.mktmpdir(name) do |tmp|
      tmp = File.realpath(tmp)
      yield shared ? app : rails_app!(RailsApp.app(tmp)), tmp
    end
  end

  # `bin/rails runner` stock, then with loadscan cold and warm: the same features, report and
  # stderr, engaged, answering most requires, and warm, at most a tenth of stock's failed openat calls.
  def assert_runner_like_stock(app, env)
    env = SECRET.merge(env)
    stock = RailsApp.boot(app, RUNNER, loadscan: false, env: env.merge(RailsApp::STOCK), strace: true)
    Dir.mktmpdir("loadscan-cache") do |cache|
      env = env.merge("LOADSCAN_CACHE_DIR" => cache)
      cold = RailsApp.boot(app, RUNNER, env: env)
      warm = RailsApp.boot(app, RUNNER, env: env, strace: true)
      label = env.fetch("RAILS_ENV", "development")
      [cold, warm].zip(%w[cold warm]).each do |boot, state|
        assert_same_run stock, boot, "#{label} (#{state})", only: %w[rails bootsnap]
        assert_answered boot.report["stats"], stock.loaded_features.size, "#{label} (#{state})"
        # Rails 7.2's app is set up by `loadscan install`: at config/boot.rb's first line, before Bundler.
        assert_equal RailsApp.rails72?, boot.report["stats"][:setup_before_bundler], "#{label} (#{state}): set up before Bundler"
      end
      assert_operator warm.failed_opens, :<=, MAX_FAILED_OPENS * stock.failed_opens,
                      "#{label}: warm failed openat #{warm.failed_opens} vs stock #{stock.failed_opens}"
      # GC deferred from setup (config/boot.rb: a known end) to after_initialize (the railtie): no
      # run in between but the memory budget's. Not before Ruby 3.4 (Loadscan::BootGC).
      gc = warm.report["stats"][:gc]
      if Loadscan::TestSupport.gc_deferred?
        assert_equal [true, "rails", gc[:runs_before_setup]], [gc[:deferred], gc[:ended_by], gc[:runs] - gc[:budget_runs]], gc.inspect
      else
        assert_equal [false, "rails"], [gc[:deferred], gc[:ended_by]], gc.inspect
      end
      [stock, warm]
    end
  end

  # `count` probes from as many processes, each forked from the same parent (`master` when given).
  def assert_forked_workers(probes, count, master: nil)
    pids = probes.map { |p| p.fetch("pid") }
    assert_equal count, pids.uniq.size, "one answer per worker: #{pids}"
    parents = probes.map { |p| p.fetch("ppid") }.uniq
    assert_equal 1, parents.size, "the workers' parents: #{parents}"
    assert_equal master, parents.first, "forked by the master" if master
    refute_includes pids, parents.first
  end

  # In each worker, the probe's require loaded the feature (true), stock and with loadscan; with
  # loadscan, engaged, answered by the index (its hits grew), the same file as stock's, and in
  # all what a stock worker has loaded at that point.
  def assert_workers_answered_from_the_index(stock, ours)
    feature = %r{/#{Regexp.escape(RailsApp::Files::PROBE_FEATURE)}\.rb\z}
    expected = stock.map { |p| p["loaded_features"].grep(feature) }.uniq
    assert_equal 1, expected.flatten.size, "stock workers loaded #{expected}"
    stock.each { |p| assert_equal true, p["required"], "a stock worker's first require of the probe feature" }
    ours.each do |probe|
      assert_equal [true, true], [probe["engaged"], probe["required"]], "worker #{probe["pid"]}: engaged, required"
      before, after = probe["hits"]
      assert_operator after, :>, before, "worker #{probe["pid"]}: its require was answered from the index"
      assert_equal expected.first, probe["loaded_features"].grep(feature)
      assert_same_loaded_features stock.first["loaded_features"], probe["loaded_features"], "worker #{probe["pid"]}"
    end
  end

  # The strace of the server's renames: the cache file was renamed into place once, by the
  # master; the last boot's record says the master wrote it.
  def assert_cache_written_once_by(master, trace, cache)
    writes = trace.grep(/rename.*"loadscan\.cache"\) = 0/)
    assert_equal 1, writes.size, "writes of the cache:\n#{writes.join}"
    assert_equal master, Integer(writes.first[/\A\d+/]), "written by the master: #{writes.first}"
    last = JSON.parse(File.read(File.join(cache, "last_boot.json")))
    assert_equal [master, "written"], last.values_at("pid", "cache")
  end
end
