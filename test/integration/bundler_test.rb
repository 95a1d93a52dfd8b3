# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"

# Boots through real Bundler, in every order a user sets things up, on whichever Ruby runs the
# suite: each boot must load exactly what stock Ruby loads, with loadscan engaged and answering
# most requires, and warm boots must make at most a tenth of stock's failed `openat` calls.
class BundlerTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp
  include App::NeedsRails

  # Apps are made once per run (bundle lock, rails new) and shared by the tests, which only
  # read them (each boot gets its own cache dir).
  def self.apps
    @apps ||= begin
      dir = File.realpath(Dir.mktmpdir("loadscan-bundler"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      { dir: dir, plain: App.plain_app(dir), rails: App.rails_app(dir) }
    end
  end

  # A fraction of the requires that search $LOAD_PATH the index must answer (measured: 99%
  # and more; the rest are optional requires of missing features and `./` paths).
  MIN_ANSWERED = 0.9
  # At most this fraction of a stock boot's failed openat (the issue's bound).
  MAX_FAILED_OPENS = 0.1

  # The plain app booted `cmd` in `order`; stock, cold and warm loadscan compared.
  def assert_engaged_boot(app, cmd, order)
    env = { "BOOT_ORDER" => order }
    stock = App.boot(app, cmd, loadscan: false, env: env, strace: true)
    # Stock loads all the app requires but the optional gem (on Ruby 3.4, only with the gems it
    # unbundled in the Gemfile): two boots that fail alike would prove little.
    assert_equal [%w[no/such/optional_gem LoadError]], stock.report["results"].select { |r| r.size > 2 }.map { |r| r.first(2) },
                 "#{cmd.join(" ")} (#{order}): stock boot"
    Dir.mktmpdir("loadscan-cache") do |cache|
      env["LOADSCAN_CACHE_DIR"] = cache
      cold = App.boot(app, cmd, env: env)
      warm = App.boot(app, cmd, env: env, strace: true)
      [cold, warm].zip(%w[cold warm]).each do |boot, state|
        label = "#{cmd.join(" ")} (#{order}, #{state})"
        # Results, $LOADED_FEATURES, and stderr: no warning of loadscan's, Ruby's own the same
        # (Ruby 3.3 warns about bundled gems, naming the requiring line).
        assert_same_run stock, boot, label, only: %w[results]
        assert_answered boot.report["stats"], stock.report["loaded_features"].size, label
      end
      assert_operator warm.failed_opens, :<=, MAX_FAILED_OPENS * stock.failed_opens,
                      "#{cmd.join(" ")} (#{order}): warm failed openat #{warm.failed_opens} vs stock #{stock.failed_opens}"
      [stock, warm]
    end
  end

  def assert_answered(stats, features, label)
    refute_nil stats, "#{label}: loadscan not active"
    assert stats[:engaged], "#{label}: require does not reach loadscan"
    answered = stats[:hits] + stats[:misses]
    searching = answered + stats[:left_to_ruby].values_at(:missing, :blind_spot, :loaded, :unavailable).sum
    assert_operator answered, :>=, MIN_ANSWERED * searching, "#{label}: #{stats.inspect}"
    # Most of the boot's features came through the index, not just a handful.
    assert_operator stats[:hits], :>=, features / 2, "#{label}: #{stats[:hits]} hits for #{features} features"
  end

  def test_loadscan_after_bundler_setup
    assert_engaged_boot(self.class.apps[:plain], [App::RUBY, "boot.rb"], "after")
  end

  def test_loadscan_before_bundler_setup
    assert_engaged_boot(self.class.apps[:plain], [App::RUBY, "boot.rb"], "before")
  end

  def test_bundle_exec
    assert_engaged_boot(self.class.apps[:plain], [File.join(App::BINDIR, "bundle"), "exec", "ruby", "boot.rb"], "none")
  end

  def test_ruby_r_bundler_setup
    assert_engaged_boot(self.class.apps[:plain], [App::RUBY, "-rbundler/setup", "boot.rb"], "none")
  end

  def test_rails_runner
    app = rails_app!(self.class.apps[:rails])

    code = App::REPORT
    cmd = [App::RUBY, "bin/rails", "runner", code]
    %w[development production].each do |rails_env|
      env = { "RAILS_ENV" => rails_env, "SECRET_KEY_BASE" => "x" * 64 }
      stock = App.boot(app, cmd, loadscan: false, env: env, strace: true)
      Dir.mktmpdir("loadscan-cache") do |cache|
        env["LOADSCAN_CACHE_DIR"] = cache
        App.boot(app, cmd, env: env) # cold
        warm = App.boot(app, cmd, env: env, strace: true)
        assert_same_run stock, warm, rails_env, only: %w[results], quiet: false
        assert_empty warm.stderr.lines.grep(/loadscan/), warm.stderr
        assert_answered warm.report["stats"], stock.report["loaded_features"].size, "rails #{rails_env}"
        # GC deferred from setup to after_initialize (the railtie): no run in between.
        gc = warm.report["stats"][:gc]
        assert_equal [true, "rails", gc[:runs_before_setup]], [gc[:deferred], gc[:ended_by], gc[:runs] - gc[:budget_runs]], gc.inspect
        assert_operator warm.failed_opens, :<=, MAX_FAILED_OPENS * stock.failed_opens,
                        "rails #{rails_env}: warm failed openat #{warm.failed_opens} vs stock #{stock.failed_opens}"
      end
    end
  end

  # The README's migration from Bootsnap: its compile cache beside loadscan, in a Rails app. Both
  # caches are used (Bootsnap's directory fills; loadscan answers), and the boot is stock's.
  def test_rails_with_bootsnaps_compile_cache
    bootsnap!
    app = rails_app!(self.class.apps[:rails])

    cmd = [App::RUBY, "bin/rails", "runner", App::REPORT]
    Dir.mktmpdir("loadscan-bootsnap") do |tmp|
      env = { "RAILS_ENV" => "production", "SECRET_KEY_BASE" => "x" * 64 }
      # Stock here is the same app with Bootsnap's compile cache and no loadscan.
      stock_env = env.merge("LOADSCAN_TEST_BOOTSNAP" => "#{tmp}/stock")
      App.boot(app, cmd, loadscan: false, env: stock_env)
      stock = App.boot(app, cmd, loadscan: false, env: stock_env)
      bootsnap = "#{tmp}/loadscan"
      Dir.mktmpdir("loadscan-cache") do |cache|
        env = env.merge("LOADSCAN_CACHE_DIR" => cache, "LOADSCAN_TEST_BOOTSNAP" => bootsnap)
        App.boot(app, cmd, env: env) # both caches cold
        warm = App.boot(app, cmd, env: env)
        assert_same_run stock, warm, "rails + bootsnap", only: %w[results], quiet: false
        assert_empty warm.stderr.lines.grep(/loadscan/), warm.stderr
        assert_answered warm.report["stats"], stock.report["loaded_features"].size, "rails + bootsnap"
        assert_operator warm.report["stats"][:roots_from_cache], :>, 0, "loadscan's cache was used"
        assert_operator Dir[File.join(bootsnap, "**", "*")].count { |f| File.file?(f) }, :>, 100, "Bootsnap's compile cache was filled"
      end
    end
  end

  # A library captured Ruby's C require before loadscan was set up (EARLY) and puts it back in
  # place of loadscan afterwards, as `bundler/setup` does with RubyGems < 3.5: loadscan takes
  # that binding over too.
  def test_a_later_rebinding_of_require_is_taken_over
    stock, boot = boot_with_prelude(<<~RUBY)
      Kernel.send(:remove_method, :require)
      Kernel.send(:define_method, :require, $c_require)
      Kernel.send(:private, :require)
    RUBY
    assert_same_run stock, boot, "rebound", only: %w[results], quiet: false
    assert_empty boot.stderr.lines.grep(/loadscan/), boot.stderr
    assert_answered boot.report["stats"], stock.report["loaded_features"].size, "rebound"
  end

  # A library wraps `require` around the C require it captured (not through Kernel): loadscan
  # cannot be in the way, so it says so, once, and the boot stays stock.
  def test_a_require_that_bypasses_loadscan_is_reported_once
    stock, boot = boot_with_prelude(<<~RUBY)
      Kernel.send(:define_method, :require) { |feature| $c_require.bind_call(self, feature) }
      Kernel.send(:private, :require)
    RUBY
    assert_same_run stock, boot, "bypassed", only: %w[results], quiet: false
    warnings = boot.stderr.lines.grep(/loadscan/)
    assert_equal 1, warnings.size, boot.stderr
    assert_match(/`require` no longer reaches loadscan: Kernel#require \(#{Regexp.escape(@prelude)}:\d+\)/, warnings.first)
    refute boot.report["stats"][:engaged]
  end

  private

  # Boots the plain app (loadscan after bundler/setup) with `prelude` run after both setups,
  # and a C require captured before either; the stock boot runs the same files.
  def boot_with_prelude(prelude)
    dir = self.class.apps[:dir]
    early = File.join(dir, "early.rb")
    File.write(early, "$c_require = Kernel.instance_method(:gem_original_require) # Ruby's own, under RubyGems\n")
    @prelude = File.join(dir, "prelude-#{name}.rb")
    File.write(@prelude, prelude)
    app = self.class.apps[:plain]
    env = { "BOOT_ORDER" => "after", "BOOT_EARLY" => early, "BOOT_PRELUDE" => @prelude }
    stock = App.boot(app, [App::RUBY, "boot.rb"], loadscan: false, env: env)
    Dir.mktmpdir("loadscan-cache") do |cache|
      [stock, App.boot(app, [App::RUBY, "boot.rb"], env: env.merge("LOADSCAN_CACHE_DIR" => cache))]
    end
  end
end
