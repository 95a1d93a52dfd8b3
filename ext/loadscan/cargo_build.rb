# frozen_string_literal: true

require "rbconfig"

module Loadscan
  # The cargo build of the extension for the Ruby running this, spelled once for `rake compile`
  # (Rakefile, in a checkout) and `gem install` (extconf.rb, in the unpacked gem):
  #
  #   build = Loadscan::CargoBuild.new(workspace)
  #   system(build.env, *build.argv, chdir: workspace)
  #   build.env     # => {"RUBY" => "/usr/bin/ruby3.1", "CARGO_TARGET_DIR" => "#{workspace}/target/ruby-3.1"}
  #   build.argv    # => ["cargo", "build", "--release", "--locked", "-p", "loadscan"]
  #   build.library # => "#{workspace}/target/ruby-3.1/release/libloadscan.so"
  #
  # A target dir per Ruby (CARGO_TARGET_DIR to choose another): rb-sys's bindings are built for
  # one Ruby, so switching Rubies in one checkout does not rebuild rb-sys and magnus every time
  # (a Ruby with its extensions linked in has one of its own, `-static`).
  class CargoBuild
    # cargo's arguments (the precompiled gems' cross builds add `--target`).
    ARGS = %w[build --release --locked -p loadscan].freeze

    attr_reader :target_dir

    def self.minor = RUBY_VERSION[/\A\d+\.\d+/]

    def initialize(workspace)
      static = RbConfig::CONFIG["EXTSTATIC"] == "static" ? "-static" : ""
      @target_dir = ENV["CARGO_TARGET_DIR"] || File.join(workspace, "target", "ruby-#{self.class.minor}#{static}")
    end

    # The command, with `cargo` as found (extconf.rb looks in ~/.cargo/bin too).
    def argv(cargo = "cargo") = [cargo, *ARGS]

    # What cargo's environment must hold (RUSTFLAGS only when it must be set).
    def env
      env = { "RUBY" => RbConfig.ruby, "CARGO_TARGET_DIR" => target_dir }
      env["RUSTFLAGS"] = rustflags unless rustflags.empty?
      env
    end

    # On musl (Alpine), rustup's Rust links the C runtime in statically by default, which rules
    # out a shared library (and the build scripts' and proc macros'): the dynamic one, as a Ruby
    # extension needs. Alpine's own Rust has it so already. RUSTFLAGS as given elsewhere.
    def rustflags
      flags = ENV["RUSTFLAGS"].to_s
      flags = "#{flags} -C target-feature=-crt-static".strip if RbConfig::CONFIG["host_os"].include?("musl")
      flags
    end

    # The library cargo builds.
    def library
      File.join(target_dir, "release", RbConfig::CONFIG["host_os"].include?("darwin") ? "libloadscan.dylib" : "libloadscan.so")
    end
  end
end
