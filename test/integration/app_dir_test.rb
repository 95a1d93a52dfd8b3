# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../support/test_accounts"

# Issue 29, item 4. Which app a process works for, and so where its cache is (Loadscan::App):
# the boot and the command line must agree. Run in the app's directory without `bundle exec`,
# `loadscan stats` and `clear` looked in ~/.cache/loadscan/exe-<hash>; in an app with no
# Gemfile `build` wrote there too, where the boot never looks; `build` recorded itself as the
# app's last boot; and `RUBYOPT="-rloadscan/setup -rbundler/setup"` put the cache in ~/.cache.
# Every process here runs with HOME in the test's dir and no LOADSCAN_CACHE_DIR, as a user's.
class AppDirTest < Minitest::Test
  include Loadscan::TestSupport::TestAccounts
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP
  BOOT = <<~RUBY
    require "bundler/setup" if File.file?(File.expand_path("../Gemfile", __dir__))
    $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
    require #{SETUP.inspect}
    require "thing"
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(Loadscan.stats.merge(cache_dir: Loadscan.config.cache_dir)))
  RUBY

  # An app in dir/name: config/boot.rb and lib/thing.rb, with a locked Gemfile when `gemfile`.
  def make_app(dir, name, gemfile:)
    app = File.join(dir, name)
    make_tree(app, [["config/boot.rb", BOOT], ["lib/thing.rb", ""]])
    if gemfile
      Loadscan::TestSupport::BundlerApp.empty_bundle(app)
    end
    app
  end

  def env(dir, app)
    Loadscan::TestSupport::BundlerApp.env(app).merge("BUNDLE_GEMFILE" => nil, "HOME" => File.join(dir, "home"),
                                                     "XDG_CACHE_HOME" => nil, "LOADSCAN_CACHE_DIR" => nil)
  end

  def boot(dir, app) = run_ruby!(file: File.join(app, "config", "boot.rb"), env: env(dir, app), chdir: app).report

  def cli(dir, app, *args)
    run = run_ruby(file: Loadscan::TestSupport::EXE, args: args, env: env(dir, app), chdir: app)
    [run.stdout, run.stderr, run.status.exitstatus]
  end

  def cache_files(app) = Dir.children(File.join(app, "tmp", "cache", "loadscan")).sort

  def test_the_command_line_uses_the_cache_of_the_app_it_runs_in
    with_files([["home/.keep", ""]]) do |dir|
      app = make_app(dir, "app", gemfile: true)
      cache = File.join(app, "tmp", "cache", "loadscan")
      assert_equal cache, boot(dir, app)[:cache_dir]
      assert_equal %w[iseq.bin last_boot.json loadscan.cache], cache_files(app)
      last = File.read(File.join(cache, "last_boot.json"))

      out, err, status = cli(dir, app, "stats")
      assert_equal [0, ""], [status, err], out
      assert_match %r{ #{Regexp.escape(File.join(app, "config", "boot.rb"))} \(pid }, out, "stats shows the app's boot"
      out, err, status = cli(dir, app, "build")
      assert_equal [0, ""], [status, err], out
      assert_match(/\A(written|clean) #{Regexp.escape(cache)}: .* \(load path from #{Regexp.escape(app)}\/Gemfile\)$/, out)
      assert_equal last, File.read(File.join(cache, "last_boot.json")), "build recorded itself as the app's last boot"
      out, err, status = cli(dir, app, "clear")
      assert_equal [0, ""], [status, err], out
      assert_equal %w[iseq.bin last_boot.json loadscan.cache].map { "removed #{File.join(cache, _1)}" }, out.lines.map(&:chomp).sort
      assert_empty cache_files(app)

      # loadscan set up before Bundler, by RUBYOPT: the app is found all the same.
      run = run_ruby("require 'thing'; report(Loadscan.config.cache_dir)", ruby_opts: ["-I#{app}/lib"], chdir: app,
                                                                        env: env(dir, app).merge("RUBYOPT" => "-I#{Loadscan::TestSupport::LIB} -rloadscan/setup -rbundler/setup"))
      assert run.success?, run.stderr
      assert_equal cache, run.report
      assert_equal %w[iseq.bin last_boot.json loadscan.cache], cache_files(app)
      assert_empty Dir.glob("#{dir}/home/**/*"), "nothing in the user's cache dir"
    end
  end

  def test_build_in_an_app_without_a_gemfile_writes_the_cache_its_boot_uses
    with_files([["home/.keep", ""]]) do |dir|
      app = make_app(dir, "nogemfile", gemfile: false)
      cache = File.join(app, "tmp", "cache", "loadscan")
      out, err, status = cli(dir, File.join(app, "lib"), "build") # below the app's root, too
      assert_equal [0, ""], [status, err], out
      assert_match(/\Awritten #{Regexp.escape(cache)}: /, out)
      assert_equal %w[iseq.bin loadscan.cache], cache_files(app), "build wrote no last boot"
      out, _, status = cli(dir, app, "stats")
      assert_equal [1, "no boot recorded in #{cache} yet"], [status, out[/\A.*yet/]]
      stats = boot(dir, app)
      assert_equal cache, stats[:cache_dir]
      assert_operator stats[:roots_from_cache], :>=, 1, "the boot did not use the cache build wrote: #{stats}"
      assert_empty Dir.glob("#{dir}/home/**/*"), "nothing in the user's cache dir"
    end
  end

  # doctor, run below the app's root (in its lib/), boots the app as the other commands find it:
  # its config/boot.rb, in its directory, with its cache.
  def test_doctor_below_the_apps_root_boots_the_app
    with_files([["home/.keep", ""]]) do |dir|
      app = make_app(dir, "app", gemfile: true)
      boot(dir, app)
      out, err, status = cli(dir, File.join(app, "lib"), "--json", "doctor")
      assert_equal [0, ""], [status, err], out
      report = JSON.parse(out)
      assert_equal ["config/boot.rb", true, true], report.values_at("boot", "set_up_by_boot", "engaged"), out
      assert_equal File.join(app, "tmp", "cache", "loadscan"), report.dig("settings", "cache_dir")
      assert_equal File.join(app, "config", "boot.rb"), report.dig("last_boot", "program")
    end
  end

  # Issue 34 (8): a stray empty Gemfile in a shared directory (world-writable and sticky, as
  # /tmp), another user's, is no one's app: a script run below it gets the user's own cache dir,
  # quietly, as root and as an ordinary user with umask 002, whose own app (775 dirs, 664 files)
  # below it still is the app.
  WHERE = %(require "loadscan/setup"; print [Loadscan::App.nearest, Loadscan.config.cache_dir].inspect)

  def test_a_stray_gemfile_in_a_shared_dir_is_no_ones_app
    skip "needs root to make test accounts and act as them" unless Process.euid.zero?
    ensure_accounts
    Dir.mktmpdir("loadscan-shared") do |top|
      File.chmod(0o755, top)
      shared = File.join(top, "shared")
      Dir.mkdir(shared)
      File.chmod(0o1777, shared)
      stray = File.join(shared, "Gemfile")
      File.write(stray, "")
      File.chown(Etc.getpwnam("nobody").uid, Etc.getgrnam("nogroup").gid, stray)
      script = ["-I", Loadscan::TestSupport::LIB, "-e", WHERE]
      # root, in a directory of its own below the shared one.
      mine = File.join(shared, "root-work")
      Dir.mkdir(mine, 0o755)
      run = run_ruby!(command: [RbConfig.ruby, *script], env: { "HOME" => top, "XDG_CACHE_HOME" => nil, "LOADSCAN_CACHE_DIR" => nil },
                      chdir: mine)
      assert_empty run.stderr
      nearest, cache = eval(run.stdout) # rubocop:disable Security/Eval
      assert_nil nearest
      assert cache.start_with?(File.join(top, ".cache", "loadscan")), cache
      # An ordinary user with umask 002: a directory of theirs below the shared one, then their app in it.
      work = File.join(shared, "solo-work")
      as_solo("mkdir", "-p", File.join(work, "home"), File.join(work, "app"), chdir: shared)
      as_solo("sh", "-c", "printf 'source \"https://rubygems.org\"\\n' > app/Gemfile", chdir: work)
      assert_equal [0o775, 0o664], [File.stat(File.join(work, "app")).mode & 0o777, File.stat(File.join(work, "app", "Gemfile")).mode & 0o777]
      home = File.join(work, "home")
      run = as_solo(RbConfig.ruby, *script, chdir: work, env: { "HOME" => home, "XDG_CACHE_HOME" => nil })
      assert_empty run.stderr
      nearest, cache = eval(run.stdout) # rubocop:disable Security/Eval
      assert_nil nearest, "another user's Gemfile in a shared dir is not this user's app"
      assert cache.start_with?(File.join(home, ".cache", "loadscan")), cache
      run = as_solo(RbConfig.ruby, *script, chdir: File.join(work, "app"), env: { "HOME" => home, "XDG_CACHE_HOME" => nil })
      assert_empty run.stderr
      assert_equal [File.join(work, "app"), File.join(work, "app", "tmp", "cache", "loadscan")], eval(run.stdout) # rubocop:disable Security/Eval
      refute File.exist?(File.join(shared, "tmp")), "nothing written in the shared dir"
    end
  end
end
