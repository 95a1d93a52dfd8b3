# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../../lib/loadscan/cli/installer"
require_relative "../../lib/loadscan/version"

# Issue 46: the first line of config/boot.rb (config/loadscan_boot.rb, which `loadscan install`
# writes) sets loadscan up before `require "bundler/setup"`, from the copy Gemfile.lock names,
# found without Bundler and without activating a gem. Real Bundler apps, set up by the installer
# itself, boot in real processes: with loadscan installed as a gem (this checkout's lib, its
# extension built for this Ruby, packed with `gem build` and installed with `gem install`, as the
# precompiled gem is) on GEM_PATH in two versions, the lockfile naming the older; in Bundler's
# vendor/bundle (`bundle config set --local path`); as a `path:` gem; as a `git:` gem. Each boot is set up before
# Bundler (Loadscan.stats), loads the locked version once (`Bundler.require` and the railtie load
# nothing of loadscan's again), and loads what stock loads apart from loadscan's own files. Where
# loadscan cannot be found early (absent from the lockfile, no lockfile), the first line does
# nothing and says nothing.
class FirstLineTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp
  ROOT = Loadscan::TestSupport::ROOT
  VERSION = Loadscan::VERSION
  # A newer version installed beside the locked one.
  NEWER = "99.0.0"
  BOOT = <<~RUBY
    ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)

    require "bundler/setup"
  RUBY
  # The app's program: config/boot.rb (as installed; stock: as before the install), then what an
  # app's boot does after it, then its report.
  PROGRAM = <<~RUBY
    require_relative(ENV["LOADSCAN_TEST_STOCK"] ? "config/stock_boot" : "config/boot")
    require "json"
    require "set"
    Bundler.require
    require "loadscan/railtie" if defined?(Loadscan)
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "loaded_features" => $LOADED_FEATURES.dup, "load_path" => $LOAD_PATH.dup,
      "stats" => defined?(Loadscan) && Loadscan.active? ? Loadscan.stats : nil,
      "version" => defined?(Loadscan::VERSION) ? Loadscan::VERSION : nil))
  RUBY

  def self.gems = @gems ||= yield

  def setup
    @tmp = File.realpath(Dir.mktmpdir("loadscan-first-line"))
    # The two versions, built once for the class.
    @gems = self.class.gems do
      dir = File.realpath(Dir.mktmpdir("loadscan-first-line-gems"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      { VERSION => build_gem(dir, VERSION), NEWER => build_gem(dir, NEWER) }
    end
  end

  def teardown
    FileUtils.rm_rf(@tmp)
  end

  def test_the_locked_version_on_gem_path_not_the_newest
    home = File.join(@tmp, "home")
    @gems.each_value { |gem_file| gem_install(gem_file, home) }
    env = env(home)
    app = app("gempath", %(gem "loadscan", "= #{VERSION}"\n), env)
    assert_includes File.read(File.join(app, "Gemfile.lock")), "    loadscan (#{VERSION})\n"
    assert_early(app, env, File.join(home, "gems", "loadscan-#{VERSION}", "lib"))
  end

  def test_the_locked_version_in_bundlers_vendor_bundle
    home = File.join(@tmp, "home") # empty: loadscan is only in vendor/bundle
    env = env(home)
    app = app("vendored", %(gem "loadscan", "= #{VERSION}"\n), env) do |dir|
      run!([File.join(App::BINDIR, "bundle"), "config", "set", "--local", "path", "vendor/bundle"], env, dir)
      vendor = File.join(dir, "vendor", "bundle", RUBY_ENGINE, RbConfig::CONFIG["ruby_version"])
      @gems.each_value { |gem_file| gem_install(gem_file, vendor) }
    end
    assert_includes File.read(File.join(app, ".bundle", "config")), "vendor/bundle"
    lib = File.join(app, "vendor", "bundle", RUBY_ENGINE, RbConfig::CONFIG["ruby_version"], "gems", "loadscan-#{VERSION}", "lib")
    assert_early(app, env, lib)
    # The same path from the environment instead: BUNDLE_PATH, or deployment mode's default.
    File.unlink(File.join(app, ".bundle", "config"))
    [{ "BUNDLE_PATH" => "vendor/bundle" }, { "BUNDLE_DEPLOYMENT" => "true" }].each do |settings|
      assert_early(app, env.merge(settings), lib)
    end
  end

  def test_a_path_gem
    env = env(File.join(@tmp, "home"))
    app = app("pathgem", %(gem "loadscan", path: #{ROOT.inspect}\n), env)
    assert_early(app, env, Loadscan::TestSupport::LIB)
    # Under `bundle exec` Bundler is set up before config/boot.rb: the first line leaves it to
    # `require "loadscan/setup"`, quietly.
    run = run_ruby(command: [File.join(App::BINDIR, "bundle"), "exec", App::RUBY, "app.rb"], env: env, chdir: app, timeout: 120)
    assert run.success?, run.stderr
    assert_equal ["", true, false], [run.stderr, *run.report["stats"].values_at(:engaged, :setup_before_bundler)]
  end

  # A `git:` gem: Bundler's checkout of the locked revision (bundle_path/bundler/gems/NAME-REV).
  def test_a_git_gem
    repo = File.join(@tmp, "loadscan-repo")
    FileUtils.cp_r(File.join(File.dirname(@gems[VERSION]), "src-#{VERSION}"), repo)
    git = ["git", "-c", "user.name=loadscan", "-c", "user.email=loadscan@example.invalid"]
    [%w[init -q .], %w[add -A -f .], %w[commit -q -m loadscan]].each do |args|
      _, err, status = capture(*git, *args, chdir: repo)
      assert status.success?, "git #{args.first}: #{err}"
    end
    home = File.join(@tmp, "home")
    env = env(home)
    app = app("gitgem", %(gem "loadscan", git: "file://#{repo}"\n), env) do |dir|
      run!([File.join(App::BINDIR, "bundle"), "install", "--local"], env, dir)
    end
    revision = File.read(File.join(app, "Gemfile.lock"))[/^  revision: (\h+)$/, 1]
    assert revision, "a GIT section"
    assert_early(app, env, File.join(home, "bundler", "gems", "loadscan-repo-#{revision[0, 12]}", "lib"))
  end

  # Without loadscan in the lockfile, or without a lockfile, the first line does nothing: the boot
  # goes on as stock's, quiet.
  def test_nothing_where_loadscan_cannot_be_found_early
    env = env(File.join(@tmp, "home"))
    app = app("absent", "", env, only: %w[config/loadscan_boot.rb config/boot.rb])
    # (No `require "loadscan/setup"` after Bundler's: the app has no loadscan.)
    boot = File.join(app, "config", "boot.rb")
    File.write(boot, File.read(boot).sub(%(require "loadscan/setup"\n), ""))
    assert_includes File.read(boot), Loadscan::Installer::Boot::FIRST_LINE
    refute_includes File.read(File.join(app, "Gemfile.lock")), "loadscan"
    [[], %w[Gemfile.lock]].each do |gone|
      # (Bundler writes a lockfile where there is none.)
      gone.each { |f| FileUtils.rm_f(File.join(app, f)) }
      ours = boot(app, env)
      gone.each { |f| FileUtils.rm_f(File.join(app, f)) }
      stock = boot(app, env, stock: true)
      assert_equal ["", nil, nil], [ours.stderr, ours.report["version"], ours.report["stats"]], gone.inspect
      assert_equal without(stock.report["loaded_features"]), without(ours.report["loaded_features"]), gone.inspect
    end
  end

  private

  # The checkout's lib/ (with this Ruby's extension) as loadscan `version`: built into `dir`.
  def build_gem(dir, version)
    src = File.join(dir, "src-#{version}")
    FileUtils.mkdir_p(src)
    FileUtils.cp_r(Loadscan::TestSupport::LIB, src)
    File.write(File.join(src, "lib", "loadscan", "version.rb"), %(# frozen_string_literal: true\n\nmodule Loadscan\n  VERSION = "#{version}"\nend\n))
    File.write(File.join(src, "loadscan.gemspec"), <<~RUBY)
      Gem::Specification.new do |spec|
        spec.name = "loadscan"
        spec.version = #{version.inspect}
        spec.summary = "loadscan (test build)"
        spec.authors = ["loadscan developers"]
        spec.files = Dir["lib/**/*"]
        spec.require_paths = ["lib"]
      end
    RUBY
    run!([File.join(App::BINDIR, "gem"), "build", "loadscan.gemspec", "--output", File.join(dir, "loadscan-#{version}.gem")],
         { "RUBYOPT" => nil }, src)
    File.join(dir, "loadscan-#{version}.gem")
  end

  def gem_install(gem_file, dir)
    run!([File.join(App::BINDIR, "gem"), "install", "--local", "--no-document", "--ignore-dependencies", "--install-dir", dir, gem_file],
         { "RUBYOPT" => nil }, @tmp)
  end

  # The environment of the app's processes: GEM_HOME `home` on GEM_PATH before Ruby's own gems,
  # no user or app settings of Bundler's but the app's own .bundle/config.
  def env(home)
    { "GEM_HOME" => home, "GEM_PATH" => [home, *App.gem_path].uniq.join(":"), "BUNDLE_GEMFILE" => nil, "BUNDLE_APP_CONFIG" => nil,
      "BUNDLE_USER_HOME" => File.join(@tmp, "bundle-user"), "BUNDLE_PATH" => nil, "BUNDLE_FROZEN" => nil,
      "BUNDLE_LOCKFILE_CHECKSUMS" => "false", "PATH" => "#{App::BINDIR}:#{ENV.fetch("PATH")}", "RUBYOPT" => nil, "RUBYLIB" => nil }
  end

  # An app in @tmp/name: its Gemfile (`gems`), config/boot.rb as Rails writes it, then (the block
  # given the dir) set up and locked, then `loadscan install`'s edits made by the installer.
  def app(name, gems, env, only: nil)
    dir = File.join(@tmp, name)
    FileUtils.mkdir_p(File.join(dir, "config"))
    File.write(File.join(dir, "Gemfile"), %(source "https://rubygems.org"\n#{gems}))
    File.write(File.join(dir, "config", "boot.rb"), BOOT)
    File.write(File.join(dir, "config", "stock_boot.rb"), BOOT)
    File.write(File.join(dir, "app.rb"), PROGRAM)
    yield dir if block_given?
    run!([File.join(App::BINDIR, "bundle"), "lock", "--local"], env, dir)
    installer = Loadscan::Installer.new(dir)
    changes = installer.changes.select(&:changed?)
    changes.select! { |change| only.include?(change.path) } if only
    assert_equal %w[config/loadscan_boot.rb config/boot.rb], changes.map(&:path), "the Gemfile has loadscan"
    installer.write(changes)
    dir
  end

  def boot(app, env, stock: false)
    run = run_ruby(command: [App::RUBY, "app.rb"], loadscan: stock ? false : nil, env: env, chdir: app, timeout: 120)
    assert run.success?, "app.rb#{" (stock)" if stock} failed:\n#{run.stdout}#{run.stderr}"
    run
  end

  # The app boots set up before Bundler, from `lib` (that copy's version), loading each of its
  # files once, quiet, and loading what stock loads apart from them.
  def assert_early(app, env, lib)
    ours = boot(app, env)
    assert_equal "", ours.stderr
    stats = ours.report["stats"]
    assert stats, "loadscan is not active"
    assert_equal [true, true], stats.values_at(:engaged, :setup_before_bundler), stats.inspect
    assert_equal VERSION, ours.report["version"]
    own = ours.report["loaded_features"].select { |f| own?(f) }
    refute_empty own
    assert own.all? { |f| f.start_with?("#{lib}/") }, "loadscan's files from elsewhere than #{lib}:\n#{own.join("\n")}"
    assert_equal own.uniq, own
    assert_includes own, File.join(lib, "loadscan", "railtie.rb")
    assert_includes ours.report["load_path"], lib, "Bundler put the locked copy on the load path"

    stock = boot(app, env, stock: true)
    assert_nil stock.report["stats"]
    assert_equal without(stock.report["loaded_features"]), without(ours.report["loaded_features"])
  end

  # A file of loadscan's (any copy: stock's boot loads it with `Bundler.require`).
  def own?(feature) = feature.include?("/lib/loadscan")

  # Features without the app's own boot files and loadscan's.
  def without(features) = features.reject { |f| own?(f) || f.match?(%r{/config/(stock_)?boot\.rb\z}) }

  def run!(cmd, env, dir)
    run = run_ruby(command: cmd, env: env, chdir: dir, timeout: 600)
    assert run.success?, "#{cmd.join(" ")} failed:\n#{run.stdout}#{run.stderr}"
    run
  end
end
