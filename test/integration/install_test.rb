# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require_relative "../support/docker_build"
require_relative "../support/rails_app"
require "json"
require "etc"

# `loadscan install` as a user coming from Bootsnap runs it: the precompiled gem installed (no
# Rust), then its `loadscan` command in an app `rails new` made, with Bootsnap as Rails wires it
# (`require "bootsnap/setup"`): Rails 8.1 with Bootsnap 1.24.6 on 3.3 and 3.4 (its Dockerfile
# too), Debian's Rails 6.1 with its Bootsnap 1.13 on 3.1. The app then boots through bin/rails
# with loadscan engaged, Bootsnap's compile cache on and its load-path cache off, loading what
# it loads with loadscan disabled and Bootsnap's load-path cache off (with loadscan disabled
# alone, Bootsnap's load-path cache is on); Bootsnap's own settings still work; a second run changes
# nothing; `loadscan doctor` reports engaged. The Dockerfile's steps, run as root, make an app
# that boots as another user from the cache, read-only.
class InstallTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  include Loadscan::TestSupport::RailsApp::NeedsRails
  App = Loadscan::TestSupport::BundlerApp
  Docker = Loadscan::TestSupport::DockerBuild
  RailsApp = Loadscan::TestSupport::RailsApp
  # Rails 6.1's generator adds these to a non-minimal app (`--minimal` skips Bootsnap).
  BOOTSNAP_GEM = %(gem 'bootsnap', '>= 1.4.4', require: false\n)
  BOOTSNAP_BOOT = %(require "bootsnap/setup" # Speed up boot time by caching expensive operations.\n)
  REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "engaged" => defined?(Loadscan) && Loadscan.engaged?, "loaded_features" => $LOADED_FEATURES.dup,
      "stats" => defined?(Loadscan) && Loadscan.active? ? Loadscan.stats : nil,
      "load_path_cache" => defined?(Bootsnap::LoadPathCache) && Bootsnap::LoadPathCache.enabled?,
      "iseq_cache" => RubyVM::InstructionSequence.respond_to?(:load_iseq)))
  RUBY
  RUNNER = [App::RUBY, "bin/rails", "runner", REPORT].freeze

  # The app, `loadscan install` run on it (with --dry-run, then for real, then again), made once
  # for the class: `{tmp:, app:, env:, rails81:, before:, after:, runs: [[output, status], ...]}`.
  def self.fixture = @fixture ||= yield

  def setup
    skip "native gems are built for x86_64 Linux" unless native_gem_supported?

    @fx = self.class.fixture { installed_app }
  end

  def test_install_in_a_rails_app_with_bootsnap
    dry, install, again = @fx[:runs]
    assert_equal 0, dry[1], dry[0]
    assert_includes dry[0], "--dry-run: nothing written"
    assert_equal 0, install[1], install[0]
    assert_equal [dry[0].sub("--dry-run: nothing written\n", ""), "changed Gemfile, config/boot.rb#{", Dockerfile" if @fx[:rails81]}"],
                 [install[0].sub(/changed .*\n\z/, ""), install[0][/changed [^;\n]*/]]
    assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", 0], again
    boot = @fx[:before]["config/boot.rb"].sub(/^require "bootsnap/, "require \"loadscan/setup\"\nrequire \"bootsnap")
    assert_equal boot, @fx[:after]["config/boot.rb"]
    assert_match(/\ngem "loadscan", require: "loadscan\/railtie" # a load-path cache for require\n\z/, @fx[:after]["Gemfile"])

    assert_boots_engaged_with_bootsnaps_compile_cache(@fx[:app], @fx[:env])
    assert_bootsnaps_settings_still_work(@fx[:app], @fx[:env])
    out, status = loadscan(@fx[:app], @fx[:env], "--json", "doctor")
    assert JSON.parse(out)["engaged"], "doctor (exit #{status}): #{out}"
  end

  # Issue 27: the Dockerfile Rails 8.1 generates, with the lines `loadscan install` added: its
  # build stage's steps after `COPY . .` run as root (Bootsnap's precompile, `loadscan build`,
  # assets:precompile, which boots the app), then the final stage's copy (new inodes) owned by
  # another user, who boots it with the final stage's ENV: every root from the cache, nothing
  # listed, the cache not written, nothing on stderr, stock's $LOADED_FEATURES. Without
  # LOADSCAN_VALIDATE=listing the copy's new inodes would make most roots be listed again.
  def test_the_dockerfile_builds_an_image_that_boots_read_only_from_the_cache
    skip "Rails #{RUBY_VERSION < "3.2" ? "6.1" : "8.1 is not installed and"} generates no Dockerfile here" unless @fx[:rails81]
    skip "needs root to build as root and boot as another user" unless Process.euid.zero?

    dockerfile = @fx[:after]["Dockerfile"]
    assert_includes dockerfile, %(RUN bundle exec bootsnap precompile -j 1 app/ lib/\n\n# Write loadscan's load-path cache)
    stages = Docker.stages(dockerfile)
    assert_includes Docker.app_steps(stages["build"]), "bundle exec loadscan build"
    image = image!(stages)
    cache = File.join(image[:app], "tmp", "cache", "loadscan", "loadscan.cache")
    written = [File.binread(cache), File.mtime(cache)]

    runtime = Docker.image_env(stages[:final].all_env, image[:bundle], image[:home])
    ours = boot_as_nobody(image[:app], runtime)
    assert ours.report["engaged"], ours.stderr
    stats = ours.report["stats"]
    assert_equal [stats[:load_path_entries], 0, 0], stats.values_at(:roots_from_cache, :roots_scanned, :roots_refreshed), stats.inspect
    assert_operator stats[:hits], :>, 1000
    assert_equal "", ours.stderr, "the image's boot is quiet"
    assert_equal written, [File.binread(cache), File.mtime(cache)], "the boot wrote the cache"
    stock = boot_as_nobody(image[:app], runtime.merge("LOADSCAN_DISABLE" => "1"))
    gems = File.join(image[:bundle], "ruby", RbConfig::CONFIG["ruby_version"])
    assert_same_loaded_features(*[stock, ours].map { |run| without_loadscan(run.report["loaded_features"], gems) })

    # (The roots under the copied dirs; Ruby's own are where they were.)
    by_mtime = boot_as_nobody(image[:app], runtime.merge("LOADSCAN_VALIDATE" => nil)).report["stats"]
    assert_operator by_mtime[:roots_scanned], :>, 0, by_mtime.inspect
  end

  private

  def installed_app
    tmp = File.realpath(Dir.mktmpdir("loadscan-install"))
    Minitest.after_run { FileUtils.rm_rf(tmp) }
    rails81 = RailsApp.rails81? && !RailsApp.no_rails
    stack!(rails81)
    env = install_gem(tmp, rails81)
    # Rails 8.1's app with its Dockerfile, the generated Gemfile as it is.
    app = rails81 ? RailsApp.rails_new(tmp, docker: true) : rails_app!(App.rails_new(tmp)).tap { |a| with_bootsnap(a) }
    before = app_files(app)
    runs = [%w[install --dry-run], %w[install], %w[install]].map { |args| loadscan(app, env, *args) }
    App.bundle_lock(app, env)
    { tmp: tmp, app: app, env: env, rails81: rails81, before: before, after: app_files(app), runs: runs }
  end

  # Rails 8.1 where its stack is installed, Debian's Rails 6.1 on its Ruby; elsewhere a Ruby
  # bin/setup provides the stack for fails, others skip.
  def stack!(rails81)
    return if rails81 || App.debian_ruby?

    reason = RailsApp.no_rails
    flunk "#{reason}: run bin/setup" if App.built_gems_expected? && RUBY_VERSION >= "3.3"
    skip reason
  end

  # The native gem, installed into tmp/home; the environment of the app's processes.
  def install_gem(tmp, rails81)
    gem_file, = build_native_gem(tmp)
    env = no_rust_env(File.join(tmp, "home"))
    env["GEM_PATH"] = [env["GEM_HOME"], *RailsApp.gem_path].join(":") if rails81
    run, = install_native_gem(gem_file, env)
    assert run.success?, run.stdout + run.stderr
    env
  end

  # Rails 6.1's app (Debian's): its Gemfile reduced to the gems installed for this Ruby, with
  # Bootsnap as Rails adds it, and its config/boot.rb requiring bootsnap/setup after bundler/setup.
  def with_bootsnap(app)
    gems = (App.rails_gems - %w[bootsnap]) | App.unbundled_gems
    File.write(File.join(app, "Gemfile"), %(source "https://rubygems.org"\n#{gems.map { |g| "gem '#{g}'\n" }.join}#{BOOTSNAP_GEM}))
    boot = File.join(app, "config", "boot.rb")
    File.write(boot, File.read(boot).sub(/^require ["']bundler\/setup["'].*\n/) { |line| line + BOOTSNAP_BOOT })
  end

  def app_files(app) = %w[Gemfile config/boot.rb Dockerfile].to_h { |f| [f, File.exist?(File.join(app, f)) && File.read(File.join(app, f))] }

  # The installed gem's `loadscan` command in the app: its output (stdout and stderr), exit status.
  def loadscan(app, env, *args)
    run = run_ruby(file: File.join(env["GEM_HOME"], "bin", "loadscan"), args: args, env: App.env(app).merge(env), chdir: app)
    [run.stdout + run.stderr, run.status.exitstatus]
  end

  def boot(app, env, extra = {}) = App.boot(app, RUNNER, env: env.merge(extra))

  def assert_boots_engaged_with_bootsnaps_compile_cache(app, env)
    ours = boot(app, env)
    assert ours.report["engaged"], ours.stderr
    assert_equal [false, true], ours.report.values_at("load_path_cache", "iseq_cache"), "Bootsnap: load-path cache, compile cache"
    refute_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "compile-cache-iseq", "**", "*")]
    assert_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "load-path-cache*")]
    # Where loadscan is off, Bootsnap keeps its load-path cache (issue 34); with it off too, the
    # boot loads what loadscan's does.
    assert_equal [nil, true], boot(app, env, "LOADSCAN_DISABLE" => "1").report.values_at("stats", "load_path_cache")
    disabled = boot(app, env, "LOADSCAN_DISABLE" => "1", "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1")
    assert_same_loaded_features(*[disabled, ours].map { |run| without_loadscan(run.report["loaded_features"], env["GEM_HOME"]) })
  end

  # `features` without the files of the loadscan gem installed in `gem_home`.
  def without_loadscan(features, gem_home)
    lib = File.join(installed_gem_dir(gem_home), "lib", "loadscan")
    features.reject { |f| f.start_with?(lib) }
  end

  # Issue 25: Bootsnap's own settings, read by its bootsnap/setup, still apply.
  def assert_bootsnaps_settings_still_work(app, env)
    moved = File.join(@fx[:tmp], "bootsnap-elsewhere")
    elsewhere = boot(app, env, "BOOTSNAP_CACHE_DIR" => moved)
    assert elsewhere.report["engaged"]
    refute_empty Dir[File.join(moved, "bootsnap", "compile-cache-iseq", "**", "*")], "BOOTSNAP_CACHE_DIR moves the compile cache"

    off = File.join(@fx[:tmp], "bootsnap-off")
    disabled = boot(app, env, "DISABLE_BOOTSNAP" => "1", "BOOTSNAP_CACHE_DIR" => off)
    assert_equal [true, false], disabled.report.values_at("engaged", "iseq_cache"), "DISABLE_BOOTSNAP=1: no compile cache"
    refute File.exist?(off), "DISABLE_BOOTSNAP=1 wrote #{off}"
  end

  # The image: the app copied in, the gems installed under BUNDLE_PATH, the build stage's app
  # steps run as root, the final stage's copy given to `nobody`. `{app:, bundle:, home:}`.
  def image!(stages)
    root = File.join(@fx[:tmp], "docker")
    home = File.join(root, "home")
    FileUtils.mkdir_p([File.join(root, "root"), home])
    File.chmod(0o755, @fx[:tmp])
    FileUtils.chown("nobody", "nogroup", home)
    app = File.join(root, "rails")
    Docker.copy_app(@fx[:app], app)
    bundle = File.join(root, "bundle")
    Docker.install_gems(bundle, [@fx[:env]["GEM_HOME"], RailsApp::GEMS, App::BUILT_GEMS, Gem.default_dir])
    build = Docker.image_env(stages["build"].all_env, bundle, File.join(root, "root"))
    Docker.app_steps(stages["build"]).each do |command|
      run = run_ruby(command: ["sh", "-c", command], env: build, chdir: app, timeout: 600)
      assert run.success?, "RUN #{command}:\n#{run.stdout}#{run.stderr}"
    end
    Docker.copy_from_build(app, bundle, "nobody")
    { app: app, bundle: bundle, home: home }
  end

  def boot_as_nobody(app, env)
    run = run_ruby(command: RUNNER, env: env.merge("LOADSCAN_CACHE_DIR" => nil), chdir: app, as_nobody: true, timeout: 600)
    assert run.success?, "bin/rails runner as nobody: #{run.stderr}"
    run
  end
end
