# frozen_string_literal: true

require_relative "../test_helper"

# ext/loadscan/extconf.rb as `gem install` runs it (in the extension's dir, here a copy of the
# checkout's ext/loadscan beside its lib/), then `make` and `make install` as RubyGems runs them:
# with the toolchain it writes the cargo build; where a piece is missing, a Makefile that builds
# nothing and installs the note saying which; a musl Ruby builds without a static C runtime.
class ExtconfTest < Minitest::Test
  MINOR = RUBY_VERSION[/\A\d+\.\d+/]
  # This Ruby's tools and the system's, none of Rust's (rustup's live in ~/.cargo/bin).
  NO_RUST_PATH = [RbConfig::CONFIG["bindir"], "/usr/bin", "/bin"].uniq.join(":")

  def setup
    @dir = Dir.mktmpdir("loadscan-extconf")
    FileUtils.mkdir_p(File.join(@dir, "ext"))
    FileUtils.cp_r(File.join(Loadscan::TestSupport::ROOT, "ext", "loadscan"), File.join(@dir, "ext"))
    FileUtils.cp_r(Loadscan::TestSupport::LIB, @dir)
    FileUtils.mkdir_p(@home = File.join(@dir, "home"))
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def ext = File.join(@dir, "ext", "loadscan")

  # Runs extconf.rb (with `prelude` Ruby code first) and returns its output and status.
  def extconf(env = {}, prelude: "")
    env = { "HOME" => @home, "CARGO" => nil, "RUSTC" => nil, "RUSTFLAGS" => nil, "LOADSCAN_REQUIRE_NATIVE" => nil }.merge(env)
    run = run_ruby("#{prelude}\nload 'extconf.rb'", env: env, chdir: ext)
    [run.stdout + run.stderr, run.status]
  end

  def make(*args)
    out, err, status = capture("make", *args, chdir: ext)
    assert status.success?, "make #{args.join(" ")}: #{out}#{err}"
  end

  # A stand-in for a tool: prints `output` for --version, fails otherwise.
  def fake(name, output)
    path = File.join(@dir, "bin", name)
    FileUtils.mkdir_p(File.dirname(path))
    File.write(path, "#!/bin/sh\n[ \"$1\" = --version ] && echo '#{output}' && exit 0\nexit 1\n")
    File.chmod(0o755, path)
    path
  end

  def test_without_cargo_it_installs_the_note_and_no_library
    out, status = extconf({ "PATH" => NO_RUST_PATH })
    assert status.success?, out
    assert_match(/installing without its native extension \(no cargo, Rust's build tool, on PATH or in ~\/.cargo\/bin\)/, out)
    assert_match(/`gem pristine loadscan`/, out)
    refute_match(/cargo build/, File.read(File.join(ext, "Makefile")))
    dest = File.join(@dir, "dest")
    %w[clean all install clean].each { |target| make(target, "sitearchdir=#{dest}") } # as RubyGems runs them
    assert_equal ["loadscan/#{MINOR}/loadscan.not-built"], Dir.glob("**/*", base: dest).select { |f| File.file?(File.join(dest, f)) }
    assert_equal "no cargo, Rust's build tool, on PATH or in ~/.cargo/bin\n", File.read(File.join(dest, "loadscan", MINOR, "loadscan.not-built"))
  end

  def test_loadscan_require_native_fails_instead
    out, status = extconf({ "PATH" => NO_RUST_PATH, "LOADSCAN_REQUIRE_NATIVE" => "1" })
    refute status.success?, out
    assert_match(/LOADSCAN_REQUIRE_NATIVE is set and the extension cannot be built \(no cargo/, out)
    refute File.exist?(File.join(ext, "Makefile"))
  end

  def test_a_rust_older_than_175_is_named
    cargo = fake("cargo", "cargo 1.70.0")
    fake("rustc", "rustc 1.70.0 (90c541806 2023-05-31)")
    out, status = extconf({ "PATH" => NO_RUST_PATH, "CARGO" => cargo })
    assert status.success?, out
    assert_match(%r{installing without its native extension \(#{Regexp.escape(File.join(@dir, "bin", "rustc"))} is Rust 1\.70\.0, older than 1\.75\)}, out)
  end

  # The toolchain present (a fake cargo and rustc 1.89): the cargo build, with the caller's
  # RUSTFLAGS, plus -crt-static where Ruby is built on musl (RbConfig's host_os, as Alpine's).
  def test_the_cargo_build_and_musl_rustflags
    skip "no libclang here" unless Dir["/usr/lib/llvm-*/lib/libclang*.so*", "/usr/lib/*/libclang*.so*"].any? || ENV["LIBCLANG_PATH"]
    cargo = fake("cargo", "cargo 1.89.0")
    fake("rustc", "rustc 1.89.0 (29483883e 2025-08-04)")
    env = { "PATH" => NO_RUST_PATH, "CARGO" => cargo }
    [["", {}, nil],
     ["", { "RUSTFLAGS" => "-C debuginfo=1" }, "RUSTFLAGS=-C\\ debuginfo\\=1 "],
     ['RbConfig::CONFIG["host_os"] = "linux-musl"', {}, "RUSTFLAGS=-C\\ target-feature\\=-crt-static "],
     ['RbConfig::CONFIG["host_os"] = "linux-musl"', { "RUSTFLAGS" => "-C debuginfo=1" },
      "RUSTFLAGS=-C\\ debuginfo\\=1\\ -C\\ target-feature\\=-crt-static "]].each do |prelude, extra, flags|
      out, status = extconf(env.merge(extra), prelude: prelude)
      assert status.success?, out
      build = File.read(File.join(ext, "Makefile"))[/^\t.*build --release.*$/]
      refute_nil build, out
      assert_includes build, "#{flags}#{cargo} build --release --locked -p loadscan" if flags
      refute_includes build, "RUSTFLAGS" unless flags
    end
  end
end
