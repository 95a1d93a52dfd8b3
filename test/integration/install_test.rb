# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require_relative "../support/rails_app"
require "json"

# `loadscan install` as a user coming from Bootsnap runs it: the precompiled gem installed (no
# Rust), then its `loadscan` command in a `rails new` app set up with Bootsnap the way Rails
# generates it (Rails 8.1 on 3.3 and 3.4; Debian's Rails 6.1 on 3.1, given the lines its
# generator writes for Bootsnap). The app must then boot with loadscan engaged, Bootsnap's compile cache on and its
# load-path cache off, loading what it loads with loadscan disabled; a second run and --dry-run
# change nothing; `loadscan doctor` reports engaged.
class InstallTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  include Loadscan::TestSupport::RailsApp::NeedsRails
  App = Loadscan::TestSupport::BundlerApp
  RailsApp = Loadscan::TestSupport::RailsApp
  # Rails 6.1's generator adds these to a non-minimal app (`--minimal` skips Bootsnap).
  BOOTSNAP_GEM = %(gem 'bootsnap', '>= 1.4.4', require: false\n)
  BOOTSNAP_BOOT = %(require "bootsnap/setup" # Speed up boot time by caching expensive operations.\n)
  REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "engaged" => defined?(Loadscan) && Loadscan.engaged?, "loaded_features" => $LOADED_FEATURES.dup,
      "load_path_cache" => Bootsnap::LoadPathCache.enabled?, "iseq_cache" => RubyVM::InstructionSequence.respond_to?(:load_iseq)))
  RUBY

  def test_install_in_a_rails_app_with_bootsnap
    skip "native gems are built for x86_64 Linux" unless native_gem_supported?
    bootsnap!

    Dir.mktmpdir("loadscan-install") do |tmp|
      tmp = File.realpath(tmp)
      app = rails_app!(RailsApp.rails_new(tmp))
      env = install_gem(tmp)
      with_bootsnap(app) unless RailsApp.rails81?
      before = app_files(app)

      out, status = loadscan(app, env, "install", "--dry-run")
      assert_equal 0, status, out
      assert_equal before, app_files(app), "--dry-run changed the app"
      assert_includes out, "-#{BOOTSNAP_BOOT}"
      out, status = loadscan(app, env, "install")
      assert_equal 0, status, out
      after = app_files(app)
      refute_equal before, after
      assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", 0], loadscan(app, env, "install")
      assert_equal after, app_files(app), "a second run changed the app"

      assert_boots_engaged_with_bootsnaps_compile_cache(app, env)
      out, status = loadscan(app, env, "--json", "doctor")
      assert JSON.parse(out)["engaged"], "doctor (exit #{status}): #{out}"
    end
  end

  # The native gem, installed into tmp/home; the environment of the app's processes.
  def install_gem(tmp)
    gem_file, = build_native_gem(tmp)
    env = no_rust_env(File.join(tmp, "home"))
    run, = install_native_gem(gem_file, env)
    assert run.success?, run.stdout + run.stderr
    # The app's gems beside it: on Rails 8.1 its gem set, in place of Debian's.
    env["GEM_PATH"] = [env["GEM_HOME"], *RailsApp.gem_path].join(":") if RailsApp.rails81?
    env
  end

  # Rails 6.1's generated app's Gemfile reduced to the gems installed for this Ruby (offline: the
  # test apps' Rails gems), with Bootsnap as Rails adds it, and its config/boot.rb requiring
  # bootsnap/setup after bundler/setup.
  def with_bootsnap(app)
    gems = (App.rails_gems - %w[bootsnap]) | App.unbundled_gems
    File.write(File.join(app, "Gemfile"), %(source "https://rubygems.org"\n#{gems.map { |g| "gem '#{g}'\n" }.join}#{BOOTSNAP_GEM}))
    boot = File.join(app, "config", "boot.rb")
    File.write(boot, File.read(boot).sub(/^require "bundler\/setup".*\n/) { |line| line + BOOTSNAP_BOOT })
  end

  def app_files(app) = %w[Gemfile config/boot.rb].to_h { |f| [f, File.read(File.join(app, f))] }

  # The installed gem's `loadscan` command in the app: its output (stdout and stderr), exit status.
  def loadscan(app, env, *args)
    run = run_ruby(file: File.join(env["GEM_HOME"], "bin", "loadscan"), args: args, env: App.env(app).merge(env), chdir: app)
    [run.stdout + run.stderr, run.status.exitstatus]
  end

  def assert_boots_engaged_with_bootsnaps_compile_cache(app, env)
    App.bundle_lock(app, env)
    runner = [App::RUBY, "bin/rails", "runner", REPORT]
    ours = App.boot(app, runner, env: env)
    disabled = App.boot(app, runner, env: env.merge("LOADSCAN_DISABLE" => "1"))
    assert ours.report["engaged"], ours.stderr
    assert_equal [false, true], ours.report.values_at("load_path_cache", "iseq_cache"), "Bootsnap: load-path cache, compile cache"
    refute_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "compile-cache-iseq", "**", "*")]
    assert_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "load-path-cache*")]
    gem_lib = File.join(installed_gem_dir(env["GEM_HOME"]), "lib", "loadscan")
    assert_same_loaded_features disabled.report["loaded_features"].reject { |f| f.start_with?(gem_lib) },
                                ours.report["loaded_features"].reject { |f| f.start_with?(gem_lib) }
  end
end
