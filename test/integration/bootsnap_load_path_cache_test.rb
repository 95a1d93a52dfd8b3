# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require_relative "../../fixtures/rails_app"

# Issue 34: `loadscan/setup` decides Bootsnap's load-path cache. The Rails 7.2 app `rails new`
# makes (Fixtures::RailsApp, Bootsnap 1.26.1 as the generator wires it: Ruby 3.3's stack), with
# config/boot.rb as `loadscan install` writes it, boots through bin/rails:
# - where loadscan is not engaged (the source gem installed without Rust; LOADSCAN_DISABLE=1),
#   with Bootsnap's load-path cache answering: its failed `openat` within 5% of the app's boot
#   with Bootsnap alone (before install), and stock's $LOADED_FEATURES;
# - where it is engaged, with Bootsnap's load-path cache off (`Loadscan.stats` says loadscan
#   turned it off) and the figures of the boot that turned it off in config/boot.rb, as install
#   did before.
class BootsnapLoadPathCacheTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  App = Loadscan::TestSupport::BundlerApp
  # What each boot reports (`bin/rails runner`).
  REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "loaded_features" => $LOADED_FEATURES.grep_v(%r{/lib/loadscan(\.rb|/)}).map { |f| f.sub(Rails.root.to_s, "APP") },
      "load_path_cache" => Bootsnap::LoadPathCache.enabled?, "variable" => ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"],
      "stats" => defined?(Loadscan.active?) && Loadscan.active? ? Loadscan.stats : nil))
  RUBY
  # A failed `openat` count within this fraction of Bootsnap's alone.
  WITHIN = 0.05

  def test_bootsnap_keeps_its_load_path_cache_wherever_loadscan_is_not_engaged
    reason = Fixtures::RailsApp.missing
    skip reason if reason && !App.built_gems_expected?
    flunk "#{reason}: run bin/setup" if reason
    skip "Ruby #{RUBY_VERSION}'s Rails stack has no Bootsnap (only 3.3's has)" unless Fixtures::RailsApp.bootsnap?
    skip "the source gem's note is for x86_64 Linux" unless native_gem_supported?

    Dir.mktmpdir("loadscan-bootsnap") do |tmp|
      tmp = File.realpath(tmp)
      rails = Fixtures::RailsApp.generate(out: File.join(tmp, "generated"))

      # The source gem installed where there is no Rust, in the app's Gemfile.
      no_rust = install_source_gem_without_rust(tmp, File.join(tmp, "norust-gems"))
      app, alone = installed(tmp, "norust", rails, %(gem "loadscan", require: "loadscan/railtie"\n), no_rust)
      run = boot(app[:root], app[:env])
      assert_equal 1, run.stderr.scan(/^loadscan: /).size, run.stderr
      assert_match(/loadscan: the source gem was installed without building its native extension/, run.stderr)
      assert_bootsnaps_own(alone, run, "the source gem installed without Rust")

      # loadscan from this checkout, engaged unless LOADSCAN_DISABLE=1.
      app, alone = installed(tmp, "checkout", rails, %(gem "loadscan", path: #{Loadscan::TestSupport::ROOT.inspect}, require: "loadscan/railtie"\n))
      assert_bootsnaps_own(alone, boot(app[:root], app[:env].merge("LOADSCAN_DISABLE" => "1")), "LOADSCAN_DISABLE=1")
      cache = { "LOADSCAN_CACHE_DIR" => File.join(tmp, "loadscan-cache") }
      engaged = boot(app[:root], app[:env].merge(cache))
      refute engaged.report["load_path_cache"], "Bootsnap's load-path cache is off where loadscan is engaged"
      stats = engaged.report["stats"]
      assert_equal [true, :turned_off], [stats[:engaged], stats[:bootsnap_load_path_cache]], stats.inspect
      assert_nil engaged.report["variable"], "taken back at after_initialize: the programs the app starts keep Bootsnap's cache"
      assert_empty engaged.stderr
      # Today's figures: the boot that turned Bootsnap's cache off itself (what install wrote before).
      before = boot(app[:root], app[:env].merge(cache, "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1"))
      assert_equal :off, before.report["stats"][:bootsnap_load_path_cache]
      assert_equal before.report["loaded_features"], engaged.report["loaded_features"]
      assert_equal before.report["stats"].values_at(:hits, :misses), stats.values_at(:hits, :misses)
      assert_equal before.failed_opens, engaged.failed_opens, "failed openat: engaged #{engaged.failed_opens}, before #{before.failed_opens}"
    end
  end

  # Without Bootsnap, on every Ruby: what `loadscan/setup` leaves in the variable `bootsnap/setup`
  # reads, for each value it finds there, engaged or not (LOADSCAN_DISABLE=1), and what
  # Loadscan.stats says.
  def test_setup_sets_bootsnaps_variable_only_when_engaged_and_takes_back_its_own
    code = %(report([ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"], Loadscan.stats&.fetch(:bootsnap_load_path_cache)]))
    [[{}, ["loadscan", :turned_off]],
     [{ "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "loadscan" }, ["loadscan", :turned_off]],
     [{ "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1" }, ["1", :off]],
     [{ "LOADSCAN_DISABLE" => "1" }, [nil, nil]],
     [{ "LOADSCAN_DISABLE" => "1", "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "loadscan" }, [nil, nil]], # an engaged parent's
     [{ "LOADSCAN_DISABLE" => "1", "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "0" }, ["0", nil]]].each do |env, expected|
      run = run_ruby!(code, loadscan: true, env: env)
      assert_equal expected, run.report, env.inspect
    end
    # When the boot ends, what loadscan set is taken back; what the user set stays.
    code = %(Loadscan.booted!; report(ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"]))
    [[{}, nil], [{ "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1" }, "1"]].each do |env, expected|
      assert_equal [expected], [run_ruby!(code, loadscan: true, env: env).report], "after Loadscan.booted!: #{env.inspect}"
    end
  end

  private

  # A warm boot of the app (`bin/rails runner`, a first run warming Bootsnap's caches), under
  # strace: its Result.
  def boot(root, env)
    cmd = [RbConfig.ruby, "bin/rails", "runner", REPORT]
    warm = run_ruby(command: cmd, env: env, chdir: root, timeout: 600)
    assert warm.success?, "#{root}: #{warm.stderr}"
    run = run_ruby(command: cmd, env: env, chdir: root, timeout: 600, strace: true)
    assert run.success?, "#{root}: #{run.stderr}"
    run
  end

  # Bootsnap's load-path cache answering as in the boot with Bootsnap alone.
  def assert_bootsnaps_own(alone, run, label)
    assert run.report["load_path_cache"], "#{label}: Bootsnap's load-path cache is on"
    assert_nil run.report["stats"], "#{label}: loadscan is not engaged"
    assert_same_loaded_features alone.report["loaded_features"], run.report["loaded_features"], label
    assert_in_delta alone.failed_opens, run.failed_opens, WITHIN * alone.failed_opens,
                    "#{label}: failed openat #{run.failed_opens} against Bootsnap's alone #{alone.failed_opens}"
  end

  # A copy of the generated app (`rails`) named `name`, with `gem_line` in its Gemfile, locked,
  # booted with Bootsnap alone (its config/boot.rb as generated), then `loadscan install` run on
  # it (this checkout's command): [{root:, env:}, the boot with Bootsnap alone].
  def installed(tmp, name, rails, gem_line, extra_env = {})
    root = File.join(tmp, name)
    FileUtils.cp_r(rails[:root], root)
    FileUtils.rm_rf(File.join(root, "tmp", "cache", "bootsnap"))
    env = Fixtures::RailsApp.env(root)
    env = env.merge(extra_env, "GEM_PATH" => [*extra_env["GEM_PATH"], env["GEM_PATH"]].join(":"))
    File.write(File.join(root, "Gemfile"), File.read(File.join(root, "Gemfile")) + gem_line)
    lock = run_ruby(command: [RbConfig.ruby, Gem.bin_path("bundler", "bundle"), "lock", "--local"], env: env, chdir: root, timeout: 600)
    assert lock.success?, lock.stdout + lock.stderr
    alone = boot(root, env)
    assert alone.report["load_path_cache"], "Bootsnap's load-path cache is on as the generator wires it"
    run = run_ruby(file: Loadscan::TestSupport::EXE, args: ["install"], env: env, chdir: root)
    assert run.success?, run.stdout + run.stderr
    boot_rb = File.read(File.join(root, "config", "boot.rb"))
    assert_match(/^require "loadscan\/setup"\nrequire "bootsnap\/setup"/, boot_rb)
    refute_includes boot_rb, "DISABLE_BOOTSNAP_LOAD_PATH_CACHE"
    [{ root: root, env: env }, alone]
  end

  # `gem build` of this checkout, installed into GEM_HOME `home` with no Rust anywhere (the
  # library not built, a note instead): the environment that sees it ({GEM_PATH:, PATH:, ...}).
  def install_source_gem_without_rust(tmp, home)
    gem_file = File.join(tmp, "loadscan.gem")
    build = run_ruby(file: File.join(RbConfig::CONFIG["bindir"], "gem"), args: ["build", "loadscan.gemspec", "--output", gem_file],
                     chdir: Loadscan::TestSupport::ROOT, timeout: 600)
    assert build.success?, build.stdout + build.stderr
    user = File.join(tmp, "user")
    FileUtils.mkdir_p(user)
    env = no_rust_env(home).merge("HOME" => user, "CARGO_HOME" => nil, "RUSTUP_HOME" => nil)
    run, = install_native_gem(gem_file, env)
    assert run.success?, run.stdout + run.stderr
    assert_empty Dir[File.join(home, "**", "*.{so,bundle}")], "no library without Rust"
    { "GEM_PATH" => home, "PATH" => "#{RbConfig::CONFIG["bindir"]}:#{NO_RUST_PATH}" }
  end
end
