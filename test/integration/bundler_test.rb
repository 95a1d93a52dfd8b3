# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"

# Boots through real Bundler, in every order a user sets things up, on whichever Ruby runs the
# suite: each boot must load exactly what stock Ruby loads, with loadscan engaged and answering
# most requires, and warm boots must make at most a tenth of stock's failed `openat` calls.
class BundlerTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp

  # The app is made once per run (bundle lock) and shared by the tests, which only read it
  # (each boot gets its own cache dir). (The Rails boots: rails_test.rb.)
  def self.apps
    @apps ||= begin
      dir = File.realpath(Dir.mktmpdir("loadscan-bundler"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      { dir: dir, plain: App.plain_app(dir) }
    end
  end

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
