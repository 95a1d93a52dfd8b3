# frozen_string_literal: true

require_relative "bundler_app"
require_relative "../../lib/loadscan/version"

module Loadscan
  module TestSupport
    # The precompiled gem for the Ruby running the tests (`rake native:x86_64` with this Ruby only;
    # its `rake compile` is warm in bin/test), installed into a fresh GEM_HOME the way a machine
    # without Rust installs it: no cargo or rustc on PATH, no LIBCLANG_PATH.
    module NativeGem
      # The platform the gem is built for, and as this RubyGems reads it: before 3.4 (Debian
      # 12's Ruby 3.1) it folds `-gnu` away and installs the gem as `x86_64-linux`.
      GEM_PLATFORM = "x86_64-linux-gnu"
      PLATFORM = Gem::Platform.new(GEM_PLATFORM).to_s
      MINOR = RUBY_VERSION[/\A\d+\.\d+/]
      # This Ruby's tools and the system's, none of Rust's (rustup's live in ~/.cargo/bin).
      NO_RUST_PATH = [BundlerApp::BINDIR, "/usr/local/bin", "/usr/bin", "/bin"].uniq.join(":")

      def native_gem_supported? = RUBY_PLATFORM.start_with?("x86_64-linux")

      # Builds the gem for `arch` into `dir`; returns its path and the build's stdout (sizes, glibc floor).
      def build_native_gem(dir, arch: "x86_64")
        run = RubyProcess.run_ruby(command: [RbConfig.ruby, "-S", "rake", "native:#{arch}"], chdir: ROOT, timeout: 1800,
                                   env: { "LOADSCAN_NATIVE_RUBIES" => BundlerApp::BINDIR, "LOADSCAN_NATIVE_PKG" => dir })
        raise "rake native:#{arch} failed:\n#{run.stdout}#{run.stderr}" unless run.success?

        [File.join(dir, "loadscan-#{Loadscan::VERSION}-#{arch}-linux-gnu.gem"), run.stdout]
      end

      # The environment of every process that uses GEM_HOME `home`: no Rust anywhere.
      def no_rust_env(home)
        { "GEM_HOME" => home, "GEM_PATH" => [home, *Gem.default_path, *BundlerApp.gem_path].uniq.join(":"),
          "PATH" => NO_RUST_PATH, "LIBCLANG_PATH" => nil, "CARGO" => nil, "RUSTC" => nil, "CARGO_TARGET_DIR" => nil }
      end

      # `gem install --local` of `gem_file` with `env`: the Result and the seconds it took.
      def install_native_gem(gem_file, env)
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        run = RubyProcess.run_ruby(file: File.join(BundlerApp::BINDIR, "gem"), args: ["install", "--local", "--no-document", gem_file],
                                   env: env, timeout: 600)
        [run, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
      end

      def installed_gem_dir(home) = File.join(home, "gems", "loadscan-#{Loadscan::VERSION}-#{PLATFORM}")
    end
  end
end
