# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"

# The aarch64 gem, cross-built (`rake native:aarch64`), run for real: Debian's arm64 Ruby 3.1
# under qemu-user installs it into an empty GEM_HOME (nothing built) and boots the Bundler test
# app with it, engaged and loading exactly what the same Ruby loads stock. The aarch64 Ruby does
# not depend on the Ruby running the suite, so this runs once, with Debian's.
class NativeGemAarch64Test < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  App = Loadscan::TestSupport::BundlerApp
  QEMU = "/usr/bin/qemu-aarch64-static"
  ARM_BIN = "/opt/rubies/ruby-3.1-arm64/usr/bin"
  ARM_RUBY = [QEMU, File.join(ARM_BIN, "ruby3.1")].freeze

  def test_the_aarch64_gem_boots_the_bundler_app_under_qemu
    skip "runs with Debian's Ruby only (the aarch64 Ruby is Debian's 3.1)" unless App.debian_ruby?
    skip "needs #{QEMU} and #{ARM_RUBY.last} (bin/setup)" unless File.executable?(QEMU) && File.executable?(ARM_RUBY.last)

    Dir.mktmpdir("loadscan-aarch64") do |tmp|
      tmp = File.realpath(tmp)
      gem_file, built = build_native_gem(tmp, arch: "aarch64")
      assert_match(/loadscan-#{Regexp.escape(Loadscan::VERSION)}-aarch64-linux-gnu\.gem: [\d.]+ MB \(Ruby 3\.1\), needs glibc >= 2\.\d+$/, built)
      home = File.join(tmp, "home")
      # The arm64 Ruby's own default gem path after GEM_HOME (the trailing separator).
      env = no_rust_env(home).merge("GEM_PATH" => "#{home}:")
      run = run_ruby(command: [*ARM_RUBY, File.join(ARM_BIN, "gem3.1"), "install", "--local", "--no-document", gem_file],
                     env: env, timeout: 600)
      assert run.success?, run.stdout + run.stderr
      refute_match(/Building native extensions/, run.stdout + run.stderr)
      gem_lib = File.join(home, "gems", "loadscan-#{Loadscan::VERSION}-aarch64-linux", "lib")

      app = App.plain_app(tmp, installed: true, extra_env: env, gems: App::COMMON_GEMS,
                               bundle: [*ARM_RUBY, File.join(ARM_BIN, "bundle3.1")])
      assert_match(/^    loadscan \(#{Regexp.escape(Loadscan::VERSION)}-aarch64-linux\)$/, File.read(File.join(app, "Gemfile.lock")))
      boot_env = env.merge("BOOT_ORDER" => "after")
      stock = App.boot(app, [*ARM_RUBY, "boot.rb"], loadscan: false, env: boot_env)
      ours = App.boot(app, [*ARM_RUBY, "boot.rb"], env: boot_env)
      features = ours.report["loaded_features"]
      assert_includes features, File.join(gem_lib, "loadscan", "3.1", "loadscan.so")
      assert ours.report["stats"]&.dig(:engaged), "require does not reach loadscan: #{ours.report["stats"].inspect}\n#{ours.stderr}"
      ours.report["loaded_features"] = features.reject { |f| f.start_with?(File.join(gem_lib, "loadscan")) }
      assert_same_run stock, ours, "the Bundler app with the aarch64 gem, under qemu"
    end
  end
end
