# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../support/test_accounts"
require "etc"

# A developer's own account on Debian, Ubuntu or Fedora (issue 17): a private group per user and
# umask 002, so `rails new` makes the app and its tmp/ mode 775. As such a user (made with
# `useradd --user-group`, as those systems make every user), an app made that way uses its cache
# in tmp/cache/loadscan with no warning; with tmp/ in a group the user shares with another, one
# warning and no cache, and the boot is still stock's. The app boots through real Bundler
# (`bundler/setup` with a Gemfile.lock), as config/boot.rb does. Needs root to make the accounts and act
# as them (`setpriv`, as `as_nobody:` does).
class PrivateGroupTest < Minitest::Test
  include Loadscan::TestSupport::TestAccounts
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP

  def setup
    skip "needs root to make test accounts and act as them" unless Process.euid.zero?
    ensure_accounts
  end

  # The app's boot (config/boot.rb, as in Rails: loadscan set up from config/): prints its
  # requires' results and $LOADED_FEATURES, and the cache's figures, as JSON.
  BOOT = <<~RUBY
    $LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../app/models", __dir__))
    require "bundler/setup"
    require #{SETUP.inspect} unless ENV["LOADSCAN_TEST_STOCK"]
    results = %w[thing models/widget widget nope].map { |f| begin; require(f); rescue LoadError => e; e.message; end }
    require "json"
    stats = defined?(Loadscan) && Loadscan.active? ? Loadscan.stats.slice(:roots_from_cache, :roots_scanned, :hits) : nil
    features = $LOADED_FEATURES.reject { |f| f.start_with?(#{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}) }
    puts JSON.generate("results" => results, "features" => features, "stats" => stats)
  RUBY

  # An app made as SOLO with umask 002, as `rails new` makes one: every directory mode 775.
  def with_app
    Dir.mktmpdir("loadscan-usergroups") do |top|
      File.chmod(0o755, top)
      staged = File.join(top, "staged")
      make_tree(staged, [["config/boot.rb", BOOT], ["lib/thing.rb", "THING = 1"], ["app/models/widget.rb", "WIDGET = 1"],
                         ["tmp/.keep", ""]])
      File.write(File.join(staged, "Gemfile"), "source \"https://rubygems.org\"\n")
      Loadscan::TestSupport::BundlerApp.bundle_lock(staged)
      FileUtils.chmod_R("a+rX", staged)
      home = File.join(top, "home")
      Dir.mkdir(home, 0o750)
      FileUtils.chown(SOLO, SOLO, home)
      # mkdir as Rails does (mode 0777 less the umask); the files copied in.
      as_solo("sh", "-c", "cd ../staged && find . -type d -exec mkdir -p ../home/app/{} ';' && " \
                          "find . -type f -exec cp {} ../home/app/{} ';'", chdir: home)
      app = File.join(home, "app")
      assert_equal 0o775, File.stat(File.join(app, "tmp")).mode & 0o777, "umask 002 makes tmp/ 775"
      yield app
    end
  end

  def boot(app, stock: false)
    argv = ["env", "BUNDLE_GEMFILE=#{File.join(app, "Gemfile")}", *("LOADSCAN_TEST_STOCK=1" if stock), RbConfig.ruby,
            File.join(app, "config", "boot.rb")]
    run = as_solo(*argv, chdir: app)
    [JSON.parse(run.stdout), run.stderr]
  end

  def test_the_users_private_group_may_write_the_apps_dirs
    with_app do |app|
      stock, = boot(app, stock: true)
      _, cold_err = boot(app)
      warm, warm_err = boot(app)
      assert_empty cold_err
      assert_empty warm_err
      assert_equal [stock["results"], stock["features"]], [warm["results"], warm["features"]]
      cache = File.join(app, "tmp", "cache", "loadscan", "loadscan.cache")
      assert File.file?(cache), "the cache was written"
      assert_equal Etc.getpwnam(SOLO).uid, File.stat(cache).uid
      assert_operator warm["stats"]["roots_from_cache"], :>=, 2, warm.inspect
      assert_equal 0, warm["stats"]["roots_scanned"], warm.inspect
      assert_operator warm["stats"]["hits"], :>=, 3, "loadscan answered the app's requires under Bundler: #{warm.inspect}"
      # The last boot's record beside it, and `Loadscan.clear_cache` (`rails loadscan:clear`),
      # through the same checks of the 775 dirs.
      last = File.join(File.dirname(cache), "last_boot.json")
      assert_equal Etc.getpwnam(SOLO).uid, File.stat(last).uid
      kept = [cache, last, File.join(File.dirname(cache), "iseq.bin")].select { |f| File.exist?(f) } # (the compile cache's too)
      run = as_solo(RbConfig.ruby, "-I", Loadscan::TestSupport::LIB, "-rloadscan", "-e", "puts Loadscan.clear_cache(ARGV[0])",
                    File.dirname(cache), chdir: app)
      assert_empty run.stderr
      assert_equal kept.sort, run.stdout.lines.map(&:chomp).sort
    end
  end

  def test_a_group_shared_with_another_user_is_refused_with_one_warning
    with_app do |app|
      FileUtils.chown(nil, TEAM, File.join(app, "tmp")) # a group with two other members
      stock, = boot(app, stock: true)
      2.times do
        fast, err = boot(app)
        assert_equal [stock["results"], stock["features"]], [fast["results"], fast["features"]]
        assert_equal 1, err.lines.size, err
        assert_match(%r{\Aloadscan: not using the cache dir .*/tmp/cache/loadscan: .*/tmp is writable by group #{TEAM} }, err)
        refute File.exist?(File.join(app, "tmp", "cache")), "no cache written"
      end
    end
  end
end
