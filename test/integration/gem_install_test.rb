# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require_relative "../../ext/loadscan/cargo_build"

# The source gem as users get it: `gem build`, then `gem install --local` into an empty
# GEM_HOME. On a machine without Rust it installs without the library (a note says why) and
# the real Bundler app boots as stock with one warning; `gem pristine loadscan` once Rust is
# there compiles the Rust extension through extconf.rb, and a boot uses it.
class GemInstallTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  App = Loadscan::TestSupport::BundlerApp
  # Seconds an install that builds nothing may take (measured: about 1 s).
  MAX_NOTE_INSTALL_S = 30

  # The `gem` command of the Ruby running the tests, run by that Ruby (not whichever is on PATH):
  # its output (stdout and stderr) and status.
  def gem_command(*args, env: {}, **opts)
    run = run_ruby(file: File.join(RbConfig::CONFIG["bindir"], "gem"), args: args, env: env, timeout: 1800, **opts)
    [run.stdout + run.stderr, run.status]
  end

  def test_installs_without_rust_boots_as_stock_then_pristine_builds_it
    Dir.mktmpdir("loadscan-gem") do |tmp|
      tmp = File.realpath(tmp)
      gem_file = File.join(tmp, "loadscan.gem")
      home = File.join(tmp, "home")
      out, status = gem_command("build", "loadscan.gemspec", "--output", gem_file, chdir: Loadscan::TestSupport::ROOT)
      assert status.success?, out

      env = without_rust(tmp, home)
      install_without_rust(gem_file, home, env)
      app = App.plain_app(tmp, installed: true, extra_env: env)
      assert_boots_as_stock_with_one_warning(app, home, env)
      assert_doctor_says_how(app, env)

      build_with_pristine(home)
    end
  end

  # No cargo or rustc on PATH, none in ~/.cargo/bin (HOME elsewhere), no LIBCLANG_PATH.
  def without_rust(tmp, home)
    user = File.join(tmp, "user")
    FileUtils.mkdir_p(user)
    env = no_rust_env(home).merge("HOME" => user, "CARGO_HOME" => nil, "RUSTUP_HOME" => nil)
    %w[cargo rustc].each do |tool|
      refute NO_RUST_PATH.split(":").any? { |d| File.executable?(File.join(d, tool)) }, "#{tool} is on #{NO_RUST_PATH}"
    end
    env
  end

  # LOADSCAN_REQUIRE_NATIVE=1 fails the install, naming what is missing; without it, the gem
  # installs in seconds with the note where the library would be, and no library.
  def install_without_rust(gem_file, home, env)
    out, status = gem_command("install", "--local", "--no-document", gem_file, env: env.merge("LOADSCAN_REQUIRE_NATIVE" => "1"))
    refute status.success?, out
    assert_match(/LOADSCAN_REQUIRE_NATIVE is set and the extension cannot be built \(no cargo/, out)

    run, seconds = install_native_gem(gem_file, env)
    assert run.success?, run.stdout + run.stderr
    assert_operator seconds, :<, MAX_NOTE_INSTALL_S, "gem install took #{seconds.round(1)} s"
    gem_dir = File.join(home, "gems", "loadscan-#{Loadscan::VERSION}")
    note = File.join(gem_dir, "lib", "loadscan", MINOR, "loadscan.not-built")
    assert_equal "no cargo, Rust's build tool, on PATH or in ~/.cargo/bin\n", File.read(note)
    assert_empty Dir[File.join(home, "**", "*.{so,bundle}")], "no library without Rust"
    make_out = File.read(Dir[File.join(home, "extensions", "**", "gem_make.out")].fetch(0))
    assert_match(/installing without its native extension \(no cargo.*`gem pristine loadscan`/, make_out)
  end

  # The Bundler app with the gem installed so: stock's $LOADED_FEATURES and results, and on
  # stderr stock's plus exactly one warning of loadscan's, which says how to get the library.
  # A second `bundle install` keeps it so (nothing to build: the gem counts as installed).
  def assert_boots_as_stock_with_one_warning(app, home, env)
    assert_match(/^    loadscan \(#{Regexp.escape(Loadscan::VERSION)}\)$/, File.read(File.join(app, "Gemfile.lock")))
    again = run_ruby(command: [File.join(App::BINDIR, "bundle"), "install", "--local"], env: App.env(app).merge(env), chdir: app,
                     timeout: 300)
    assert again.success?, again.stdout + again.stderr
    boot_env = env.merge("BOOT_ORDER" => "after")
    stock = App.boot(app, [App::RUBY, "boot.rb"], loadscan: false, env: boot_env)
    ours = App.boot(app, [App::RUBY, "boot.rb"], env: boot_env)
    assert_nil ours.report["stats"], "loadscan is off"
    ours_lines = ours.stderr.lines
    warnings = ours_lines.grep(/loadscan/)
    assert_equal 1, warnings.size, ours.stderr
    assert_match(/\Aloadscan: the source gem was installed without building its native extension \(no cargo.*\): booting with Ruby's own require; .*`gem pristine loadscan`/,
                 warnings.first)
    assert_equal stock.stderr.lines, ours_lines - warnings
    own = File.join(home, "gems", "loadscan-#{Loadscan::VERSION}", "lib", "loadscan")
    ours.report["loaded_features"] = ours.report["loaded_features"].reject { |f| f.start_with?(own) }
    assert_same_run stock, ours, "the Bundler app with the source gem installed without Rust", quiet: false
  end

  # `loadscan doctor` on the app's config/boot.rb, as `loadscan install` writes it, names the
  # cause and the way out, and not that the boot lacks the setup (it has it; setup stayed off).
  def assert_doctor_says_how(app, env)
    FileUtils.mkdir_p(File.join(app, "config"))
    File.write(File.join(app, "config", "boot.rb"), %(require "bundler/setup"\nrequire "loadscan/setup"\n))
    run = run_ruby(command: [File.join(App::BINDIR, "bundle"), "exec", "loadscan", "doctor"], env: App.env(app).merge(env),
                   chdir: app, timeout: 300)
    refute run.success?, run.stdout
    problems = run.stdout.lines.grep(/^PROBLEM: /)
    assert_equal 1, problems.size, run.stdout + run.stderr
    assert_match(/^PROBLEM: the source gem was installed without building its native extension \(no cargo.*rustup\.rs.*`gem pristine loadscan`/,
                 problems.first)
  end

  # With Rust, `gem pristine loadscan` (what the warning says) builds the library: exactly what a
  # user's install runs, extconf + a cold cargo build inside the unpacked gem, whose build dir
  # must be gone afterwards. That takes minutes on 2 busy cores, so it runs cold on one Ruby
  # (Debian's); another reuses a build dir of the checkout's (rb-sys's bindings are per Ruby),
  # which stays a real extconf + cargo build of the unpacked gem. That dir starts as a copy of
  # the one `rake compile` just built for this Ruby, so a clean clone builds only loadscan's own
  # crates there, not rb-sys, magnus and bindgen once more per Ruby.
  def build_with_pristine(home)
    cold = RbConfig.ruby == "/usr/bin/ruby#{MINOR}"
    target = cold ? nil : File.join(Loadscan::TestSupport::ROOT, "target", "gem-install-ruby-#{MINOR}")
    seed_build_dir(target) if target
    env = { "GEM_HOME" => home, "GEM_PATH" => home, "RUBYOPT" => nil, "RUBYLIB" => nil, "CARGO_TARGET_DIR" => target }
    out, status = gem_command("pristine", "loadscan", env: env)
    assert status.success?, out
    gem_dir = File.join(home, "gems", "loadscan-#{Loadscan::VERSION}")
    refute File.exist?(File.join(gem_dir, "target")), "cargo's build dir is left in the installed gem" if cold
    assert_empty Dir[File.join(home, "**", "loadscan.not-built")], "the note is gone once the library is built"
    size = Dir[File.join(home, "{gems,extensions}", "**", "*")].select { |f| File.file?(f) }.sum { |f| File.size(f) }
    assert_operator size, :<, 5 * 1024 * 1024, "the installed gem takes #{size} bytes"
    refute_empty Dir[File.join(gem_dir, "ext", "*", "src", "*.rs")]
    assert_empty Dir[File.join(gem_dir, "{test,bench,fixtures}")] + Dir[File.join(gem_dir, "ext", "*", "{tests,examples}")],
                 "tests and benchmarks are not shipped"
    assert_boots_with_the_built_library(home, env)
  end

  # Copies the checkout's build dir for this Ruby (Loadscan::CargoBuild's, built by `rake compile`
  # before the suite) to `target` when it has none yet: into a temp dir beside it, then one rename.
  def seed_build_dir(target)
    built = Loadscan::CargoBuild.new(Loadscan::TestSupport::ROOT).target_dir
    return if File.exist?(target) || !File.directory?(built) || ENV["CARGO_TARGET_DIR"]

    tmp = "#{target}.seeding#{Process.pid}"
    FileUtils.rm_rf(tmp)
    FileUtils.cp_r(built, tmp, preserve: true)
    File.rename(tmp, target)
  end

  def assert_boots_with_the_built_library(home, env)
    with_files([["app/lib/hello.rb", "$hello = __FILE__"]]) do |dir|
      # loadscan as the installed gem sets it up (no `-r` of this checkout's).
      run = run_ruby(<<~RUBY, env: env, chdir: dir)
        require "loadscan/setup"
        $LOAD_PATH.unshift(#{"#{dir}/app/lib".inspect})
        report([Loadscan.active?, $LOADED_FEATURES.grep(/loadscan\\.so/).first, Loadscan.lookup("hello"), require("hello"), $hello])
      RUBY
      assert run.success?, run.stderr
      refute_match(/loadscan/, run.stderr)
      active, so, looked_up, required, loaded = run.report
      assert active
      assert so.start_with?(home), "the extension should come from the installed gem, got #{so}"
      assert so.end_with?("/loadscan/#{MINOR}/loadscan.so"), "built for this Ruby, where native.rb looks: #{so}"
      assert_equal "#{dir}/app/lib/hello.rb", looked_up
      assert_equal [true, "#{dir}/app/lib/hello.rb"], [required, loaded]
    end
  end
end
