# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require_relative "../support/docker_build"
require_relative "../support/rails_app"
require "json"
require "etc"

# `loadscan install` as a user runs it: the precompiled gem installed (no Rust), then its
# `loadscan` command in an app `rails new` made, with Bootsnap as Rails wires it (`require
# "bootsnap/setup"`) where the stack has it: Rails 7.2 from Debian sid with Bootsnap 1.26.1 on
# 3.3 and without Bootsnap on 3.4 (its Dockerfile too), Debian's Rails 6.1 with its Bootsnap 1.13
# on 3.1. The app then boots through bin/rails with loadscan engaged, loading what it loads with
# loadscan disabled; with Bootsnap, its compile cache on, its load-path cache off (on where
# loadscan is disabled alone) and its own settings (`BOOTSNAP_*`) still working; a second run
# changes nothing; `loadscan doctor` reports engaged. With Bootsnap, the Dockerfile's steps, run as
# root, make an app that boots as another user from the cache, read-only; without it, the
# Dockerfile is left alone with a note.
class InstallTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  include Loadscan::TestSupport::RailsApp::NeedsRails
  App = Loadscan::TestSupport::BundlerApp
  Docker = Loadscan::TestSupport::DockerBuild
  RailsApp = Loadscan::TestSupport::RailsApp
  # Rails 6.1's generator adds these to a non-minimal app (`--minimal` skips Bootsnap).
  # (Rails 7.2's app has Bootsnap where its stack has it: RailsApp.bootsnap_stack?.)
  BOOTSNAP_GEM = %(gem 'bootsnap', '>= 1.4.4', require: false\n)
  BOOTSNAP_BOOT = %(require "bootsnap/setup" # Speed up boot time by caching expensive operations.\n)
  REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(
      "engaged" => defined?(Loadscan) && Loadscan.engaged?, "loaded_features" => $LOADED_FEATURES.dup,
      "stats" => defined?(Loadscan) && Loadscan.active? ? Loadscan.stats : nil,
      "load_path_cache" => defined?(Bootsnap::LoadPathCache) && Bootsnap::LoadPathCache.enabled?,
      "iseq_cache" => #{RailsApp::ISEQ_CACHE}))
  RUBY
  RUNNER = [App::RUBY, "bin/rails", "runner", REPORT].freeze

  # The app, `loadscan install` run on it (with --dry-run, then for real, then again), made once
  # for the class: `{tmp:, app:, env:, rails72:, before:, after:, runs: [[output, status], ...]}`.
  def self.fixture = @fixture ||= yield

  def setup
    skip "native gems are built for x86_64 Linux" unless native_gem_supported?

    @fx = self.class.fixture { installed_app }
  end

  def test_install_in_a_rails_app
    dry, install, again = @fx[:runs]
    assert_equal 0, dry[1], dry[0]
    assert_includes dry[0], "--dry-run: nothing written"
    assert_equal 0, install[1], install[0]
    docker = ", Dockerfile" if @fx[:rails72] && RailsApp.bootsnap_stack?
    assert_equal [dry[0].sub("--dry-run: nothing written\n", ""), "changed Gemfile, config/loadscan_boot.rb, config/boot.rb#{docker}"],
                 [install[0].sub(/changed .*\n\z/, ""), install[0][/changed [^;\n]*/]]
    assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", 0], [again[0].lines.last, again[1]]
    assert_equal installed_boot(@fx[:before]["config/boot.rb"]), @fx[:after]["config/boot.rb"]
    assert_match(/\ngem "loadscan", require: "loadscan\/railtie" # a load-path cache for require\n\z/, @fx[:after]["Gemfile"])

    assert_boots_engaged(@fx[:app], @fx[:env])
    assert_bootsnaps_settings_still_work(@fx[:app], @fx[:env]) if RailsApp.bootsnap_stack?
    out, status = loadscan(@fx[:app], @fx[:env], "--json", "doctor")
    assert JSON.parse(out)["engaged"], "doctor (exit #{status}): #{out}"
  end

  # Issue 48: `loadscan uninstall` puts the app back: after an install, `bundle lock`, a boot
  # (which fills tmp/cache/loadscan), then `uninstall` (which writes nothing) and `uninstall
  # --write` and `bundle lock`, every file of the app outside log/ and tmp/ is byte for byte as
  # `rails new` made it and locked it (Gemfile.lock too), and the cache dir is gone.
  #
  # The source gem is installed too (without Rust: no library), as rubygems.org offers both: with
  # the precompiled gem alone Bundler could not lock the `ruby` platform, and drops it from the
  # lockfile for good.
  def test_uninstall_puts_the_app_back_byte_for_byte
    tmp = File.realpath(Dir.mktmpdir("loadscan-uninstall"))
    env = with_source_gem(tmp)
    app = @fx[:rails72] ? RailsApp.rails_new(tmp, docker: true) : App.rails_new(tmp).tap { |a| with_bootsnap(a) }
    App.bundle_lock(app, env)
    before = tree(app)
    assert_equal 0, loadscan(app, env, "install")[1]
    App.bundle_lock(app, env)
    assert_includes File.read(File.join(app, "Gemfile.lock")), "loadscan"
    ours = boot(app, env, "LOADSCAN_CACHE_DIR" => nil) # (the app's own cache dir)
    assert_equal [true, true], [ours.report["engaged"], ours.report["stats"][:setup_before_bundler]]
    assert File.directory?(File.join(app, "tmp", "cache", "loadscan"))
    installed = tree(app)
    out, status = loadscan(app, env, "uninstall")
    assert_equal 0, status, out
    assert_equal installed, tree(app), "uninstall without --write wrote"
    out, status = loadscan(app, env, "uninstall", "--write")
    assert_equal 0, status, out
    assert_includes out, "tmp/cache/loadscan/; now run `bundle install`"
    App.bundle_lock(app, env)
    after = tree(app)
    differ = (before.keys | after.keys).reject { |rel| before[rel] == after[rel] }
    assert_empty differ.map { |rel| [rel, *[before[rel], after[rel]].map { |m, t| [m, t && (t.lines - (before[rel][1].to_s.lines & after[rel][1].to_s.lines))] }] }
    refute File.exist?(File.join(app, "tmp", "cache", "loadscan"))
  ensure
    FileUtils.rm_rf(tmp) if tmp
  end

  # Issue 27: the Dockerfile Rails 7.2 generates with Bootsnap (3.3), with the lines `loadscan
  # install` added: its build stage's steps after `COPY . .` run as root (Bootsnap's precompile, `loadscan build`,
  # assets:precompile, which boots the app), then the final stage's copy (new inodes) owned by
  # another user, who boots it with the final stage's ENV: every root from the cache, nothing
  # listed, the cache not written, nothing on stderr, stock's $LOADED_FEATURES. Without
  # LOADSCAN_VALIDATE=listing the copy's new inodes would make most roots be listed again.
  if RailsApp.rails72? && RailsApp.bootsnap_stack?
    def test_the_dockerfile_builds_an_image_that_boots_read_only_from_the_cache
      skip "needs root to build as root and boot as another user" unless Process.euid.zero?

      dockerfile = @fx[:after]["Dockerfile"]
      assert_includes dockerfile, %(RUN bundle exec bootsnap precompile app/ lib/\n\n# Write loadscan's load-path cache)
      stages = Docker.stages(dockerfile)
      assert_includes Docker.app_steps(stages["build"]), "bundle exec loadscan build"
      image = image!(stages)
      cache = File.join(image[:app], "tmp", "cache", "loadscan", "loadscan.cache")
      written = [File.binread(cache), File.mtime(cache)]

      runtime = Docker.image_env(stages[:final].all_env, image[:bundle], image[:home])
      ours = boot_as_nobody(image[:app], runtime)
      assert ours.report["engaged"], ours.stderr
      stats = ours.report["stats"]
      assert stats[:setup_before_bundler], "the first line found the gem in BUNDLE_PATH (#{image[:bundle]})"
      assert_equal [stats[:load_path_entries], 0, 0], stats.values_at(:roots_from_cache, :roots_scanned, :roots_refreshed), stats.inspect
      assert_operator stats[:hits], :>, 1000
      assert_equal "", ours.stderr, "the image's boot is quiet"
      assert_equal written, [File.binread(cache), File.mtime(cache)], "the boot wrote the cache"
      # (Stock's require: Bootsnap keeps its load-path cache where loadscan is disabled.)
      stock = boot_as_nobody(image[:app], runtime.merge("LOADSCAN_DISABLE" => "1", "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1"))
      gems = File.join(image[:bundle], "ruby", RbConfig::CONFIG["ruby_version"])
      assert_same_loaded_features(*[stock, ours].map { |run| without_loadscan(run.report["loaded_features"], gems) })

      # (The roots under the copied dirs; Ruby's own are where they were.)
      by_mtime = boot_as_nobody(image[:app], runtime.merge("LOADSCAN_VALIDATE" => nil)).report["stats"]
      assert_operator by_mtime[:roots_scanned], :>, 0, by_mtime.inspect
    end
  elsif RailsApp.rails72?
    # Without Bootsnap (3.4's app) the Dockerfile has no precompile step to put `loadscan build`
    # beside: it is left as it is, and the install says what to add by hand.
    def test_a_dockerfile_without_bootsnap_is_left_alone_with_a_note
      dockerfile = @fx[:before]["Dockerfile"]
      assert dockerfile, "rails new wrote no Dockerfile"
      refute_match(/bootsnap/, dockerfile)
      assert_equal dockerfile, @fx[:after]["Dockerfile"]
      assert_includes @fx[:runs][1][0], "Dockerfile left as it is (no single `RUN bundle exec bootsnap precompile"
    end
  end

  private

  def installed_app
    tmp = File.realpath(Dir.mktmpdir("loadscan-install"))
    Minitest.after_run { FileUtils.rm_rf(tmp) }
    rails72 = RailsApp.rails72?
    rails_app!(nil) if RailsApp.no_rails # fails (bin/setup provides the stack) or skips, saying why
    env = install_gem(tmp, rails72)
    # Rails 7.2's app with its Dockerfile, the generated Gemfile as it is.
    app = rails72 ? RailsApp.rails_new(tmp, docker: true) : App.rails_new(tmp).tap { |a| with_bootsnap(a) }
    before = app_files(app)
    runs = [%w[install --dry-run], %w[install], %w[install]].map { |args| loadscan(app, env, *args) }
    App.bundle_lock(app, env)
    { tmp: tmp, app: app, env: env, rails72: rails72, before: before, after: app_files(app), runs: runs }
  end

  # The native gem, installed into tmp/home; the environment of the app's processes (on Rails
  # 7.2, its stack's GEM_PATH after that home, and nio4r pure).
  def install_gem(tmp, rails72)
    gem_file, = build_native_gem(tmp)
    env = no_rust_env(File.join(tmp, "home"))
    if rails72
      env.merge!(RailsApp.env_overrides)
      env["GEM_PATH"] = [env["GEM_HOME"], *Fixtures::RailsApp.gem_dirs].join(":")
    end
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

  # The fixture's environment with the source gem (`gem build`, installed without Rust) on GEM_PATH too.
  def with_source_gem(tmp)
    gem_file = File.join(tmp, "loadscan-source.gem")
    run = run_ruby(file: File.join(RbConfig::CONFIG["bindir"], "gem"), args: ["build", "loadscan.gemspec", "--output", gem_file],
                   chdir: Loadscan::TestSupport::ROOT, timeout: 600)
    assert run.success?, run.stdout + run.stderr
    home = File.join(tmp, "source-gem")
    run, = install_native_gem(gem_file, no_rust_env(home).merge("HOME" => tmp))
    assert run.success?, run.stdout + run.stderr
    @fx[:env].merge("GEM_PATH" => "#{@fx[:env]["GEM_PATH"]}:#{home}")
  end

  # Every file of the app outside log/ and tmp/: `{relative path => [mode, bytes]}` (a directory's bytes: nil).
  def tree(app)
    Dir.glob("**/*", File::FNM_DOTMATCH, base: app).reject { |rel| rel.match?(%r{\A(log|tmp)(/|\z)|(\A|/)\.\.?\z}) }.sort.to_h do |rel|
      path = File.join(app, rel)
      [rel, [File.lstat(path).mode, File.file?(path) ? File.binread(path) : nil]]
    end
  end

  def app_files(app) = %w[Gemfile config/boot.rb Dockerfile].to_h { |f| [f, File.exist?(File.join(app, f)) && File.read(File.join(app, f))] }

  # The installed gem's `loadscan` command in the app: its output (stdout and stderr), exit status.
  def loadscan(app, env, *args)
    run = run_ruby(file: File.join(env["GEM_HOME"], "bin", "loadscan"), args: args, env: App.env(app).merge(env), chdir: app)
    [run.stdout + run.stderr, run.status.exitstatus]
  end

  def boot(app, env, extra = {}) = App.boot(app, RUNNER, env: env.merge(extra))

  # config/boot.rb as `loadscan install` writes it: `require "loadscan/setup"` before Bootsnap's
  # setup, or without Bootsnap after Bundler's; the first line before Bundler's.
  def installed_boot(before)
    first = "#{Loadscan::Installer::Boot::FIRST_LINE}\n"
    return before.sub(/^require ["']bundler\/setup["'].*\n/) { |line| %(#{first}#{line}require "loadscan/setup"\n) } unless RailsApp.bootsnap_stack?

    before.sub(/^require "bootsnap/, "require \"loadscan/setup\"\nrequire \"bootsnap").sub(/^(?=require ["']bundler\/setup)/, first)
  end

  # The app boots engaged, loading what it loads with loadscan disabled; with Bootsnap, its
  # load-path cache is off and its compile cache set up but unused for Ruby files (loadscan's
  # iseq.bin answers, issue 46), and where loadscan is disabled Bootsnap keeps its load-path
  # cache (issue 34): the features are compared with that cache off too.
  def assert_boots_engaged(app, env)
    ours = boot(app, env)
    assert ours.report["engaged"], ours.stderr
    # Set up at the first line, before Bundler, from the precompiled gem Gemfile.lock names.
    assert ours.report["stats"][:setup_before_bundler], ours.report["stats"].inspect
    bootsnap = [false, true] if RailsApp.bootsnap_stack?
    assert_equal bootsnap || [nil, false], ours.report.values_at("load_path_cache", "iseq_cache"), "Bootsnap: load-path cache, compile cache"
    if RailsApp.bootsnap_stack?
      assert_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "compile-cache-iseq", "**", "*")].select { |f| File.file?(f) }
      compiled = ours.report["stats"][:compile_cache]
      assert_operator compiled[:hits] + compiled[:misses], :>, 100, compiled.inspect
      assert_empty Dir[File.join(app, "tmp", "cache", "bootsnap", "load-path-cache*")]
      assert_equal [nil, true], boot(app, env, "LOADSCAN_DISABLE" => "1").report.values_at("stats", "load_path_cache")
      disabled = boot(app, env, "LOADSCAN_DISABLE" => "1", "DISABLE_BOOTSNAP_LOAD_PATH_CACHE" => "1")
    else
      disabled = boot(app, env, "LOADSCAN_DISABLE" => "1")
    end
    assert_same_loaded_features(*[disabled, ours].map { |run| without_loadscan(run.report["loaded_features"], env["GEM_HOME"]) })
  end

  # `features` without the files of the loadscan gem installed in `gem_home`.
  def without_loadscan(features, gem_home)
    lib = File.join(installed_gem_dir(gem_home), "lib", "loadscan")
    features.reject { |f| f.start_with?(lib) }
  end

  # Issue 25: Bootsnap's own settings, read by its bootsnap/setup, still apply.
  def assert_bootsnaps_settings_still_work(app, env)
    # (With loadscan's compile cache off, so that Bootsnap's iseq cache has files to move.)
    moved = File.join(@fx[:tmp], "bootsnap-elsewhere")
    elsewhere = boot(app, env, "BOOTSNAP_CACHE_DIR" => moved, "LOADSCAN_COMPILE_CACHE" => "0")
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
    Docker.install_gems(bundle, [@fx[:env]["GEM_HOME"], *Fixtures::RailsApp.gem_dirs])
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
