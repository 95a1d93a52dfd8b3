# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../support/rails_app"

# Issue 46: `loadscan build` fills the compile cache for a Docker image. It boots the app once in
# a child with the cache dir writable (a Rails app: `bin/rails runner nil`); a boot that may not
# write (LOADSCAN_READONLY=1, as the image's user) is then served from the compile cache every
# file the build's boot compiled, and loads what stock loads. A boot that fails leaves the index
# written and the exit status 0, with one line saying why the compile cache was not filled.
class BuildCompileCacheTest < Minitest::Test
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP
  LIB_DIR = File.expand_path("../../lib/", __dir__) + "/" # loadscan's own files (the stock boot has none)
  RailsApp = Loadscan::TestSupport::RailsApp
  BundlerApp = Loadscan::TestSupport::BundlerApp
  BOOT = <<~RUBY
    $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
    require "bundler/setup"
    require #{SETUP.inspect} unless ENV["LOADSCAN_TEST_STOCK"]
    %w[thing deep/er/est].each { |f| require f }
    if (report = ENV["LOADSCAN_TEST_REPORT"])
      figures = defined?(Loadscan.stats) && Loadscan.stats && Loadscan.stats[:compile_cache]
      File.binwrite(report, Marshal.dump("loaded_features" => $LOADED_FEATURES.dup, "figures" => figures))
    end
  RUBY
  LIB = [["lib/thing.rb", "module Thing; def self.x = [1, 2].map { _1 * 2 }; end\n"],
         ["lib/deep/er/est.rb", "require \"thing\"\nclass Est; def y = Thing.x; end\n"]].freeze
  SECRET = { "SECRET_KEY_BASE" => "x" * 64 }.freeze
  REPORT = <<~RUBY
    figures = defined?(Loadscan.stats) && Loadscan.stats && Loadscan.stats[:compile_cache]
    # (the files Ruby compiled in this boot: the compile cache's misses)
    missed = defined?(Loadscan::Native) ? Loadscan::Native.compile_cache_pending.map(&:first) : []
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump("loaded_features" => $LOADED_FEATURES.dup, "figures" => figures, "missed" => missed))
  RUBY

  def test_build_fills_the_compile_cache_a_read_only_boot_is_served_from
    Dir.mktmpdir("loadscan-build-cc") do |tmp|
      app = File.join(File.realpath(tmp), "app")
      make_tree(app, [["config/boot.rb", BOOT], *LIB])
      BundlerApp.empty_bundle(app)
      env = BundlerApp.env(app).merge("LOADSCAN_CACHE_DIR" => nil)
      build = run_ruby(command: [RbConfig.ruby, Loadscan::TestSupport::EXE, "-I", "lib", "build"], env: env, chdir: app)
      assert build.success?, build.stderr
      assert_match(/\Awritten .*\ncompile cache: \d+ files from config\/boot.rb \(\d+ compiled now, \d+ KB written\)\n\z/, build.stdout)
      files = build.stdout[/compile cache: (\d+) files/, 1].to_i
      assert_operator files, :>=, LIB.size, build.stdout
      dir = File.join(app, "tmp", "cache", "loadscan")
      assert_equal %w[iseq.bin loadscan.cache], Dir.children(dir).sort, "the build's boot left no record of its own"
      iseq = File.stat(File.join(dir, "iseq.bin"))

      stock = run_ruby(file: File.join(app, "config", "boot.rb"), env: env.merge("LOADSCAN_TEST_STOCK" => "1"), chdir: app)
      warm = run_ruby(file: File.join(app, "config", "boot.rb"), env: env.merge("LOADSCAN_READONLY" => "1"), chdir: app)
      assert warm.success?, warm.stderr
      assert_equal "", warm.stderr
      assert_equal stock.report["loaded_features"], warm.report["loaded_features"].reject { _1.start_with?(LIB_DIR) }
      figures = warm.report["figures"]
      assert_operator figures[:hits], :>=, LIB.size, figures.inspect
      assert_equal 0, figures[:misses], figures.inspect
      assert_equal [iseq.mtime, iseq.ino], File.stat(File.join(dir, "iseq.bin")).then { [_1.mtime, _1.ino] }
    end
  end

  def test_a_boot_that_fails_leaves_the_index_written_and_says_why
    Dir.mktmpdir("loadscan-build-cc") do |tmp|
      app = File.join(File.realpath(tmp), "app")
      make_tree(app, [["config/boot.rb", "#{BOOT}raise 'no database here'\n"], *LIB])
      BundlerApp.empty_bundle(app)
      build = run_ruby(command: [RbConfig.ruby, Loadscan::TestSupport::EXE, "build"], env: BundlerApp.env(app).merge("LOADSCAN_CACHE_DIR" => nil),
                       chdir: app)
      assert build.success?, build.stderr
      assert_match(/\Awritten .*\ncompile cache not filled: config\/boot.rb failed: RuntimeError: no database here\n\z/, build.stdout)
      assert File.file?(File.join(app, "tmp", "cache", "loadscan", "loadscan.cache"))
    end
  end

  def test_build_fills_the_rails_apps_compile_cache_with_bin_rails_runner
    skip "the Rails 7.2 app (Ruby 3.2 and newer)" unless RailsApp.rails72?
    Dir.mktmpdir("loadscan-build-cc-rails") do |tmp|
      app = RailsApp.app(File.realpath(tmp))
      skip RailsApp.no_rails unless app
      env = RailsApp.env(app).merge(SECRET, "LOADSCAN_CACHE_DIR" => nil)
      build = run_ruby(command: [RbConfig.ruby, Loadscan::TestSupport::EXE, "build"], env: env, chdir: app, timeout: 600)
      assert build.success?, build.stderr
      assert_match(/^compile cache: \d+ files from bin\/rails runner nil \(development\)/, build.stdout)
      assert_operator build.stdout[/compile cache: (\d+) files/, 1].to_i, :>=, 200, build.stdout

      runner = [RbConfig.ruby, "bin/rails", "runner", REPORT]
      stock = RailsApp.boot(app, runner, loadscan: false, env: SECRET.merge(RailsApp::STOCK, "DISABLE_BOOTSNAP_COMPILE_CACHE" => "1"))
      warm = RailsApp.boot(app, runner, env: SECRET.merge("LOADSCAN_READONLY" => "1", "LOADSCAN_CACHE_DIR" => nil))
      bootsnaps = %r{/(?:bootsnap|msgpack)-[^/]+/}
      assert_same_loaded_features stock.report["loaded_features"].grep_v(bootsnaps).sort, warm.report["loaded_features"].grep_v(bootsnaps).sort
      figures = warm.report["figures"]
      assert_operator figures[:hits], :>=, 200, figures.inspect
      # Nothing compiled: Bundler's and RubyGems' own files too, which the boot loads after loadscan's
      # first line (the build's boot did not inherit BUNDLER_SETUP, which RubyGems requires at start).
      assert_empty warm.report["missed"], figures.inspect
      assert_equal 0, figures[:misses], figures.inspect
    end
  end
end
