# frozen_string_literal: true

require_relative "../test_helper"

# The gem as users get it: `gem build`, then `gem install --local` into an empty GEM_HOME,
# which compiles the Rust extension from source through extconf.rb; then a boot with it.
class GemInstallTest < Minitest::Test
  MINOR = RUBY_VERSION[/\A\d+\.\d+/]

  # The `gem` command of the Ruby running the tests, run by that Ruby (not whichever is on PATH):
  # its output (stdout and stderr) and status.
  def gem_command(*args, env: {}, **opts)
    run = run_ruby(file: File.join(RbConfig::CONFIG["bindir"], "gem"), args: args, env: env, timeout: 1800, **opts)
    [run.stdout + run.stderr, run.status]
  end

  def test_build_install_and_boot_from_an_empty_gem_home
    Dir.mktmpdir("loadscan-gem") do |tmp|
      gem_file = File.join(tmp, "loadscan.gem")
      home = File.join(tmp, "home")
      out, status = gem_command("build", "loadscan.gemspec", "--output", gem_file, chdir: Loadscan::TestSupport::ROOT)
      assert status.success?, out
      # Exactly what a user runs: extconf + a cold cargo build inside the unpacked gem, whose
      # build dir must be gone afterwards. That takes minutes on 2 busy cores, so it runs on one
      # Ruby (Debian's); another reuses a build dir of the checkout's (rb-sys's bindings are per
      # Ruby), which stays a real extconf + cargo build of the unpacked gem.
      cold = RbConfig.ruby == "/usr/bin/ruby#{MINOR}"
      target = cold ? nil : File.join(Loadscan::TestSupport::ROOT, "target", "gem-install-ruby-#{MINOR}")
      env = { "GEM_HOME" => home, "GEM_PATH" => home, "RUBYOPT" => nil, "RUBYLIB" => nil, "CARGO_TARGET_DIR" => target }
      out, status = gem_command("install", "--local", "--no-document", gem_file, env: env)
      assert status.success?, out
      gem_dir = Dir[File.join(home, "gems", "loadscan-*")].first
      refute File.exist?(File.join(gem_dir, "target")), "cargo's build dir is left in the installed gem" if cold
      size = Dir[File.join(home, "{gems,extensions}", "**", "*")].select { |f| File.file?(f) }.sum { |f| File.size(f) }
      assert_operator size, :<, 5 * 1024 * 1024, "the installed gem takes #{size} bytes"
      refute_empty Dir[File.join(gem_dir, "ext", "*", "src", "*.rs")]
      assert_empty Dir[File.join(gem_dir, "{test,bench,fixtures}")] + Dir[File.join(gem_dir, "ext", "*", "{tests,examples}")],
                   "tests and benchmarks are not shipped"

      with_files([["app/lib/hello.rb", "$hello = __FILE__"]]) do |dir|
        # loadscan as the installed gem sets it up (no `-r` of this checkout's).
        run = run_ruby(<<~RUBY, env: env, chdir: dir)
          require "loadscan/setup"
          $LOAD_PATH.unshift(#{"#{dir}/app/lib".inspect})
          report([Loadscan.active?, $LOADED_FEATURES.grep(/loadscan\\.so/).first, Loadscan.lookup("hello"), require("hello"), $hello])
        RUBY
        assert run.success?, run.stderr
        active, so, looked_up, required, loaded = run.report
        assert active
        assert so.start_with?(home), "the extension should come from the installed gem, got #{so}"
        assert so.end_with?("/loadscan/#{MINOR}/loadscan.so"), "built for this Ruby, where native.rb looks: #{so}"
        assert_equal "#{dir}/app/lib/hello.rb", looked_up
        assert_equal [true, "#{dir}/app/lib/hello.rb"], [required, loaded]
      end
    end
  end
end
