# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"

# Issue 29, item 5: the README's Docker recipe. Root copies the app in (`COPY`: every directory
# changed a moment ago) and runs `loadscan build` in it; the app's user boots it. Each boot,
# with the recipe's settings or without them, must be quiet (it wrote nothing: root's cache dir
# is not the user's to write) and served whole from the cache (nothing listed again). The
# directories copied just before the build were racy, so every boot of the read-only cache
# listed them again; and a boot without LOADSCAN_READONLY warned on each exit that it could not
# record its figures. Needs root to build as root and boot as user nobody.
class ImageCacheTest < Minitest::Test
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP
  BOOT = <<~RUBY
    $LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../app/models", __dir__))
    require "bundler/setup"
    require #{SETUP.inspect} unless ENV["LOADSCAN_TEST_STOCK"]
    results = %w[thing widget deep/er/est nope].map { |f| begin; require(f); rescue LoadError => e; e.message; end }
    stats = defined?(Loadscan) ? Loadscan.stats : nil
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump("results" => results, "stats" => stats))
  RUBY
  # The boots' settings in the README's recipe (and the Dockerfile `loadscan install` writes).
  RECIPE = { "LOADSCAN_READONLY" => "1", "LOADSCAN_VALIDATE" => "listing" }.freeze

  def setup
    skip "needs root to build as root and boot as another user" unless Process.euid.zero?
  end

  def test_a_cache_built_by_root_right_after_the_copy_serves_the_apps_user_whole_and_quietly
    Dir.mktmpdir("loadscan-image") do |top|
      File.chmod(0o755, top)
      searchable_parent(top)
      app = File.join(top, "app")
      make_tree(app, [["config/boot.rb", BOOT], ["tmp/.keep", ""]])
      Loadscan::TestSupport::BundlerApp.empty_bundle(app)
      # The app's code, copied in just before the build.
      make_tree(app, [["lib/thing.rb", ""], ["lib/deep/er/est.rb", ""], ["app/models/widget.rb", ""]])
      FileUtils.chmod_R("a+rX", app)
      env = Loadscan::TestSupport::BundlerApp.env(app).merge("LOADSCAN_CACHE_DIR" => nil, "HOME" => "/nonexistent")
      # The boot's load path: Bundler's, and the app's own dirs in front (`-I`, as the boot puts them).
      build = run_ruby(command: [RbConfig.ruby, Loadscan::TestSupport::EXE, "-I", "lib", "-I", "app/models", "build"], env: env, chdir: app)
      assert build.success?, build.stderr
      cache = File.join(app, "tmp", "cache", "loadscan", "loadscan.cache")
      assert_match(/\Awritten #{Regexp.escape(File.dirname(cache))}: /, build.stdout)
      built = File.stat(cache)
      assert_equal 0, built.uid

      boot = ->(extra) { run_ruby(file: File.join(app, "config", "boot.rb"), env: env.merge(extra), chdir: app, as_nobody: true) }
      stock = boot.call("LOADSCAN_TEST_STOCK" => "1")
      assert stock.success?, stock.stderr
      [{}, RECIPE].each do |settings|
        run = boot.call(settings)
        label = "boot with #{settings.empty? ? "no settings" : settings}"
        assert run.success?, "#{label}: #{run.stderr}"
        assert_equal "", run.stderr, "#{label} warned"
        assert_equal stock.report["results"], run.report["results"], label
        stats = run.report["stats"]
        assert_equal [0, 0, 0], stats.values_at(:roots_scanned, :roots_refreshed, :dirs_listed_lazily), "#{label} listed: #{stats}"
        assert_operator stats[:roots_from_cache], :>=, 3, "#{label}: #{stats}"
        assert_operator stats[:hits], :>=, 3, "#{label}: #{stats}"
      end
      assert_equal [built.mtime, built.ino], File.stat(cache).then { [_1.mtime, _1.ino] }, "a boot wrote the cache"
      assert_equal %w[iseq.bin loadscan.cache], Dir.children(File.dirname(cache)).sort, "a boot recorded its figures"
    end
  end
end
