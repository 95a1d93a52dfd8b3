# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/rails_app"
require_relative "../support/test_accounts"
require "etc"
require "json"

# The Rails app as a developer on Debian, Ubuntu or Fedora has it: made by their own account
# (a private group, umask 002, so every directory `rails new` makes is 775) and booted by it with
# `bin/rails runner`, through real Bundler and the app's Gemfile.lock. Where the Rails stack sits
# in root's home (bin/setup-rails-gems' cache), the account sees it through a mount namespace of
# its own with root's home hidden, as if the stack were installed where it can read it.
class RailsUserTest < Minitest::Test
  include Loadscan::TestSupport::TestAccounts
  RailsApp = Loadscan::TestSupport::RailsApp
  include RailsApp::NeedsRails

  REPORT = <<~RUBY
    require "json"
    own = #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}
    stats = Loadscan.stats.slice(:roots_from_cache, :roots_scanned, :hits, :setup_before_bundler) if defined?(Loadscan.active?) && Loadscan.active?
    puts "REPORT " + JSON.generate("features" => $LOADED_FEATURES.reject { _1.start_with?(own) }, "stats" => stats,
                                   "rails" => [Rails.version, Rails.env.to_s])
  RUBY

  def setup
    skip "needs root to make test accounts and act as them" unless Process.euid.zero?
    ensure_accounts
  end

  # A copy of the test app made by SOLO with umask 002 in top/home/railsapp: directories 775,
  # every file SOLO's.
  def solo_app(top)
    template = rails_app!(RailsApp.app(top))
    FileUtils.chmod_R("a+rX", template)
    home = File.join(top, "home")
    Dir.mkdir(home, 0o750)
    FileUtils.chown(SOLO, SOLO, home)
    copy = "cd #{template} && find . -type d -exec mkdir -p ../home/app/{} ';' && find . ! -type d -exec cp -P {} ../home/app/{} ';'"
    solo_run(["sh", "-c", copy], chdir: home, visible: [])
    File.join(home, "app")
  end

  # Where a path the app needs sits below a directory SOLO cannot enter (root's home), the paths
  # to bind back into a mount namespace that hides that directory: [hidden, [paths]].
  def hidden_paths(paths)
    paths.filter_map do |path|
      blocked = path.split("/").each_index.map { |i| path.split("/")[0..i].join("/") }.drop(1).find do |dir|
        File.directory?(dir) && File.stat(dir).mode & 0o001 == 0 && File.stat(dir).uid != Etc.getpwnam(SOLO).uid
      end
      [blocked, path] if blocked
    end.group_by(&:first).transform_values { |pairs| pairs.map(&:last) }
  end

  # Runs argv as SOLO (umask 002); the paths in `visible` stay readable where root's home hides them.
  def solo_run(argv, chdir:, visible:, env: {})
    hidden = hidden_paths(visible.select { File.exist?(_1) })
    return as_solo(*argv, chdir: chdir, env: env) if hidden.empty?

    keep = Dir.mktmpdir("loadscan-keep")
    mounts = hidden.flat_map do |dir, paths|
      binds = paths.each_with_index.map { |p, i| ["mkdir -p #{keep}/#{i} && mount --bind #{p} #{keep}/#{i}", "mkdir -p #{p} && mount --bind #{keep}/#{i} #{p}"] }
      [*binds.map(&:first), "mount -t tmpfs -o mode=755 tmpfs #{dir}", *binds.map(&:last)]
    end
    script = "set -e; #{mounts.join("; ")}; exec \"$@\""
    wrapped = ["unshare", "--mount", "sh", "-c", script, "sh", "setpriv", "--reuid=#{SOLO}", "--regid=#{SOLO}", "--init-groups",
               "sh", "-c", 'umask 002 && exec "$@"', "sh", *argv]
    run_ruby!(command: wrapped, env: { "HOME" => chdir, "LOADSCAN_CACHE_DIR" => nil }.merge(env), chdir: chdir)
  ensure
    FileUtils.rm_rf(keep) if keep
  end

  def runner(app, stock: false)
    env = RailsApp.env(app).merge("SECRET_KEY_BASE" => "x" * 64)
    env.merge!(RailsApp::STOCK, "LOADSCAN_TEST_STOCK" => "1") if stock
    visible = [Fixtures::RailsApp.gem_cache, Loadscan::TestSupport::ROOT]
    run = solo_run([RbConfig.ruby, "bin/rails", "runner", REPORT], chdir: app, visible: visible, env: env)
    [JSON.parse(run.stdout[/^REPORT (.*)$/, 1]), run.stderr]
  end

  def test_bin_rails_as_a_user_with_a_private_group_and_umask_002
    Dir.mktmpdir("loadscan-rails-user") do |top|
      File.chmod(0o755, top)
      app = solo_app(top)
      assert_equal 0o775, File.stat(File.join(app, "tmp")).mode & 0o777, "umask 002 makes tmp/ 775"
      stock, stock_err = runner(app, stock: true)
      cold, cold_err = runner(app)
      warm, warm_err = runner(app)
      assert_equal RailsApp.series, stock["rails"][0][/\A\d+\.\d+/]
      assert_equal [stock_err, stock_err], [cold_err, warm_err], "no warning of loadscan's as the app's owner"
      [cold, warm].each { |boot| assert_equal stock["features"], boot["features"] }
      cache = File.join(app, "tmp", "cache", "loadscan", "loadscan.cache")
      assert File.file?(cache), "the cache is the app's tmp/cache/loadscan"
      assert_equal Etc.getpwnam(SOLO).uid, File.stat(cache).uid
      assert_equal 0, File.stat(cache).mode & 0o002, "not writable by others"
      assert_operator warm["stats"]["roots_from_cache"], :>, 0, warm["stats"].inspect
      assert_equal 0, warm["stats"]["roots_scanned"], "the warm boot lists nothing: #{warm["stats"].inspect}"
      assert_operator warm["stats"]["hits"], :>, 100, "loadscan answered the boot's requires"
      # Rails 7.2's app is set up by `loadscan install`: at config/boot.rb's first line, before Bundler.
      assert_equal [RailsApp.rails72?] * 2, [cold, warm].map { |boot| boot["stats"]["setup_before_bundler"] }
    end
  end
end
