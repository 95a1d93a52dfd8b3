# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_gem"
require "rubygems/package"

# The aarch64 gem, cross-built (`rake native:aarch64`), run for real on each aarch64 Ruby under
# qemu-user: Debian's arm64 3.1, the aarch64 builds of 3.3 and 3.4 from ../shared/rubies, and 4.0
# where one was cross-built by hand (CONTRIBUTING.md, "The matrix").
# Each installs the one gem into an empty GEM_HOME (nothing built) and boots the Bundler test app
# with it, engaged and loading exactly what the same Ruby loads stock. The aarch64 Rubies do not
# depend on the Ruby running the suite, so this runs once, with Debian's.
class NativeGemAarch64Test < Minitest::Test
  include Loadscan::TestSupport::NativeGem
  App = Loadscan::TestSupport::BundlerApp
  QEMU = "/usr/bin/qemu-aarch64-static"
  # The CPU qemu emulates: a Neoverse N1 (AWS Graviton 2, Ampere Altra). Its default, "max",
  # emulates pointer authentication in software and runs Ruby about 5 times slower.
  QEMU_CPU = "neoverse-n1"

  # Where bin/setup finds the aarch64 Rubies' tarballs: with them there, a missing Ruby fails the test.
  TARBALLS = File.expand_path("../shared/rubies/ruby-*-debian12-aarch64.tar.xz", Loadscan::TestSupport::ROOT)

  # An aarch64 Ruby: its `ruby` executable, the suffix of its tools' names beside it (Debian's are
  # gem3.1, bundle3.1), and its default gem dir, put on GEM_PATH between the test's GEM_HOME and
  # Debian's pure-Ruby gems (nil: Debian's own Ruby, whose default path, after the trailing
  # separator, has both).
  Target = Struct.new(:minor, :ruby, :suffix, :gem_dir) do
    def tool(name) = [QEMU, ruby, File.join(File.dirname(ruby), "#{name}#{suffix}")]
    def gem_path(home) = gem_dir ? [home, gem_dir, App::DEBIAN_GEMS].join(":") : "#{home}:"
    # What 3.4 and 4.0 moved out of their default gems, which the app's gems need (BundlerApp).
    def gems = App::COMMON_GEMS + (at_least?("3.4") ? App::UNBUNDLED_IN_34 : []) + (at_least?("4.0") ? App::UNBUNDLED_IN_40 : [])
    # The gem's platform as this Ruby's RubyGems reads it: Debian 3.1's (RubyGems 3.3) folds `-gnu` away.
    def platform = at_least?("3.3") ? "aarch64-linux-gnu" : "aarch64-linux"
    def at_least?(version) = Gem::Version.new(minor) >= Gem::Version.new(version)
  end
  TARGETS = [
    Target.new("3.1", "/opt/rubies/ruby-3.1-arm64/usr/bin/ruby3.1", "3.1", nil),
    Target.new("3.3", "/opt/rubies/ruby-3.3.8-aarch64/bin/ruby", "", "/opt/rubies/ruby-3.3.8-aarch64/lib/ruby/gems/3.3.0"),
    Target.new("3.4", "/opt/rubies/ruby-3.4.5-aarch64/bin/ruby", "", "/opt/rubies/ruby-3.4.5-aarch64/lib/ruby/gems/3.4.0"),
    # Built by hand without its bundled gems, which are installed into its gem dir by hand too.
    *[Target.new("4.0", "/opt/rubies/ruby-4.0.2-aarch64/bin/ruby", "", "/opt/rubies/ruby-4.0.2-aarch64/lib/ruby/gems/4.0.0")]
      .select { |t| File.executable?(t.ruby) },
  ].freeze

  # The gem, built once for the class (into a dir removed at exit), with the build's output.
  def self.gem_build(test)
    @gem_build ||= begin
      dir = File.realpath(Dir.mktmpdir("loadscan-aarch64-gem"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      test.build_native_gem(dir, arch: "aarch64")
    end
  end

  TARGETS.each do |target|
    define_method(:"test_the_aarch64_gem_boots_the_bundler_app_on_#{target.minor.tr(".", "_")}_under_qemu") do
      boots_the_bundler_app(target)
    end
  end

  def test_the_aarch64_gem_holds_every_aarch64_ruby
    skip_unless_runnable
    gem_file, built = self.class.gem_build(self)
    minors = TARGETS.map(&:minor)
    assert_match(/aarch64-linux-gnu\.gem: [\d.]+ MB \(Ruby #{minors.join(", ")}\), needs glibc >= 2\.\d+$/, built)
    spec = Gem::Package.new(gem_file).spec
    assert_empty spec.extensions
    assert_equal minors.map { |m| "lib/loadscan/#{m}/loadscan.so" }, spec.files.grep(/\.so\z/)
    # Exactly the minors it holds (RubyGems gives any other Ruby the source gem).
    admitted = %w[3.0.7 3.1.0 3.1.7 3.2.0 3.2.9 3.3.0 3.3.8 3.4.5 3.5.0 4.0.0 4.0.2 4.1.0].select do |v|
      spec.required_ruby_version.satisfied_by?(Gem::Version.new(v))
    end
    # With 4.0 the range spans 3.5 (only ever previews; test/rakelib/native_gem_test.rb says why).
    assert_equal %w[3.1.0 3.1.7 3.3.0 3.3.8 3.4.5] + (minors.include?("4.0") ? %w[3.5.0 4.0.0 4.0.2] : []), admitted
  end

  private

  def skip_unless_runnable
    skip "runs with Debian's Ruby only (the aarch64 Rubies do not depend on the one running the suite)" unless App.debian_ruby?
    absent = [QEMU, *TARGETS.map(&:ruby)].reject { |f| File.executable?(f) }
    return if absent.empty?

    reason = "needs #{absent.join(", ")} (bin/setup unpacks the aarch64 Rubies from ../shared/rubies)"
    flunk "#{reason}: run bin/setup" unless Dir[TARBALLS].empty?
    skip reason
  end

  def boots_the_bundler_app(target)
    skip_unless_runnable
    gem_file, = self.class.gem_build(self)
    Dir.mktmpdir("loadscan-aarch64") do |tmp|
      tmp = File.realpath(tmp)
      home = File.join(tmp, "home")
      env = no_rust_env(home).merge("GEM_PATH" => target.gem_path(home), "QEMU_CPU" => QEMU_CPU)
      gem_lib = install_under_qemu(target, gem_file, home, env)
      app = App.plain_app(tmp, installed: true, extra_env: env, gems: target.gems, bundle: target.tool("bundle"))
      assert_match(/^    loadscan \(#{Regexp.escape(Loadscan::VERSION)}-#{target.platform}\)$/, File.read(File.join(app, "Gemfile.lock")))
      boot_env = env.merge("BOOT_ORDER" => "after")
      stock = App.boot(app, [QEMU, target.ruby, "boot.rb"], loadscan: false, env: boot_env)
      ours = App.boot(app, [QEMU, target.ruby, "boot.rb"], env: boot_env)
      features = ours.report["loaded_features"]
      assert_includes features, File.join(gem_lib, "loadscan", target.minor, "loadscan.so")
      stats = ours.report["stats"]
      assert stats&.dig(:engaged), "require does not reach loadscan on #{target.minor}: #{stats.inspect}\n#{ours.stderr}"
      assert_operator stats[:hits], :>, 0, "loadscan answered nothing on #{target.minor}: #{stats.inspect}"
      ours.report["loaded_features"] = features.reject { |f| f.start_with?(File.join(gem_lib, "loadscan")) }
      assert_same_run stock, ours, "the Bundler app with the aarch64 gem, on #{target.minor} under qemu"
    end
  end

  # `gem install --local` with the aarch64 Ruby: the precompiled gem, nothing built. Returns the
  # installed gem's lib dir.
  def install_under_qemu(target, gem_file, home, env)
    run = run_ruby(command: [*target.tool("gem"), "install", "--local", "--no-document", gem_file], env: env, timeout: 600)
    assert run.success?, run.stdout + run.stderr
    refute_match(/Building native extensions/, run.stdout + run.stderr)
    gems = Dir.children(File.join(home, "gems"))
    assert_equal ["loadscan-#{Loadscan::VERSION}-#{target.platform}"], gems
    # No extension was built: RubyGems keeps a built one's files (and gem.build_complete) there.
    assert_empty Dir.glob("#{home}/extensions/**/*", File::FNM_DOTMATCH).select { |f| File.file?(f) }
    File.join(home, "gems", gems.first, "lib")
  end
end
