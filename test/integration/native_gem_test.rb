# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require "rubygems/package"

# The precompiled gem as users get it: `rake native:x86_64` (for the Ruby running the tests),
# then `gem install --local` into an empty GEM_HOME with no Rust anywhere on PATH and no
# LIBCLANG_PATH: it must build nothing and take seconds; then the real Bundler test app boots
# with the installed gem, engaged and loading exactly what stock Ruby loads.
class NativeGemTest < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  App = Loadscan::TestSupport::BundlerApp
  # Seconds `gem install` may take (measured: about 1 s; a source install takes minutes).
  MAX_INSTALL_S = 30

  def test_installs_without_rust_and_boots_the_bundler_app_engaged
    skip "native gems are built for x86_64 Linux" unless native_gem_supported?

    Dir.mktmpdir("loadscan-native-gem") do |tmp|
      tmp = File.realpath(tmp)
      gem_file, built = build_native_gem(tmp)
      assert_match(/#{Regexp.escape(File.basename(gem_file))}: [\d.]+ MB \(Ruby #{MINOR}\), needs glibc >= 2\.\d+$/, built)
      assert_for_glibc_only(gem_file)
      home = File.join(tmp, "home")
      env = no_rust_env(home)
      %w[cargo rustc].each do |tool|
        refute NO_RUST_PATH.split(":").any? { |d| File.executable?(File.join(d, tool)) }, "#{tool} is on #{NO_RUST_PATH}"
      end

      run, seconds = install_native_gem(gem_file, env)
      assert run.success?, run.stdout + run.stderr
      assert_operator seconds, :<, MAX_INSTALL_S, "gem install took #{seconds.round(1)} s"
      refute_match(/Building native extensions/, run.stdout + run.stderr)
      gem_dir = installed_gem_dir(home)
      assert File.file?(File.join(gem_dir, "lib", "loadscan", MINOR, "loadscan.so")), Dir[File.join(home, "**", "*")].join("\n")
      assert_empty Dir[File.join(home, "extensions", "**", "*")], "nothing built into extensions/"
      assert_empty Dir[File.join(gem_dir, "{ext,target,Cargo.*}")], "no Rust sources or build dir in the native gem"

      assert_boots_like_stock(tmp, env, File.join(gem_dir, "lib"))
    end
  end

  # The gem's platform is `x86_64-linux-gnu`: RubyGems 3.4 and later install it on glibc and
  # not on musl (which takes the source gem); older ones (Debian 12's Ruby 3.1) read it as
  # `x86_64-linux`, which they install on both (README, "Install").
  def assert_for_glibc_only(gem_file)
    platform = Gem::Platform.new(Gem::Package.new(gem_file).spec.platform)
    assert_equal PLATFORM, platform.to_s
    assert Gem::Platform.new("x86_64-linux") === platform, "a glibc machine takes #{platform}"
    return if Gem::Version.new(Gem::VERSION) < Gem::Version.new("3.4")

    refute Gem::Platform.new("x86_64-linux-musl") === platform, "a musl machine takes #{platform}"
  end

  def assert_boots_like_stock(tmp, env, gem_lib)
    app = App.plain_app(tmp, installed: true, extra_env: env)
    assert_match(/^    loadscan \(#{Regexp.escape(Loadscan::VERSION)}-#{PLATFORM}\)$/, File.read(File.join(app, "Gemfile.lock")))
    boot_env = env.merge("BOOT_ORDER" => "after")
    stock = App.boot(app, [App::RUBY, "boot.rb"], loadscan: false, env: boot_env)
    ours = App.boot(app, [App::RUBY, "boot.rb"], env: boot_env)
    features = ours.report["loaded_features"]
    assert_includes features, File.join(gem_lib, "loadscan", MINOR, "loadscan.so")
    assert ours.report["stats"]&.dig(:engaged), "require does not reach loadscan: #{ours.report["stats"].inspect}\n#{ours.stderr}"
    ours.report["loaded_features"] = features.reject { |f| f.start_with?(File.join(gem_lib, "loadscan")) }
    assert_same_run stock, ours, "the Bundler app with the native gem"
  end
end
