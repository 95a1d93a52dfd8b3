# frozen_string_literal: true

require "rubygems/package"
require "fileutils"
require "open3"
require "tmpdir"
require_relative "../ext/loadscan/cargo_build"

# Precompiled ("native") gems: one .gem per platform holding `lib/loadscan/<minor>/loadscan.so`
# for every Ruby it supports and no extension to build, so RubyGems and Bundler install it in
# seconds without Rust (`rake native`; README, "Install"). The source gem stays the fallback.
module NativeGem
  ROOT = File.expand_path("..", __dir__)
  # The x86_64 matrix: each Ruby's bin dir (LOADSCAN_NATIVE_RUBIES, colon-separated, to override);
  # Ruby 4.0 where one was built by hand (CONTRIBUTING.md, "The matrix").
  RUBIES = ENV.fetch("LOADSCAN_NATIVE_RUBIES") do
    ["/usr/bin", "/opt/rubies/ruby-3.3.8/bin", "/opt/rubies/ruby-3.4.5/bin",
     *Dir["/opt/rubies/ruby-4.0.2/bin"].select { |bin| File.executable?(File.join(bin, "ruby")) }].join(":")
  end.split(":")
  # The aarch64 matrix, by `ruby` executable (LOADSCAN_AARCH64_RUBIES, colon-separated, to
  # override), each run under qemu-user for rb-sys, which asks it for the target's RbConfig
  # (headers and flags of the aarch64 build): Debian's arm64 Ruby 3.1 (bin/setup unpacks it; its
  # headers are ruby3.1-dev:arm64's), the aarch64 builds of 3.3 and 3.4 from ../shared/rubies
  # (bin/setup unpacks them at the prefix they were built for), and Ruby 4.0 where one was
  # cross-built by hand (CONTRIBUTING.md, "The matrix").
  AARCH64_RUBIES = ENV.fetch("LOADSCAN_AARCH64_RUBIES") do
    [*%w[/opt/rubies/ruby-3.1-arm64/usr/bin/ruby3.1 /opt/rubies/ruby-3.3.8-aarch64/bin/ruby
         /opt/rubies/ruby-3.4.5-aarch64/bin/ruby],
     *Dir["/opt/rubies/ruby-4.0.2-aarch64/bin/ruby"].select { |ruby| File.executable?(ruby) }].join(":")
  end.split(":")
  # qemu-user emulating a Neoverse N1 (AWS Graviton 2): its default CPU ("max") emulates pointer
  # authentication in software, which makes Ruby about 5 times slower.
  QEMU = %w[qemu-aarch64-static -cpu neoverse-n1].freeze
  AARCH64_TARGET = "aarch64-unknown-linux-gnu"
  # The minors between two shipped ones (3.2 between 3.1 and 3.3) are excluded release by
  # release: RubyGems ANDs requirements, so a gap is `!= 3.2.0`, `!= 3.2.1`, …; 3.2 is
  # end-of-life and had far fewer releases than this.
  GAP_RELEASES = 20
  # The oldest glibc the gems support (README, "Install"): a library needing a newer symbol
  # version fails the build. 2.34 is where the pthread_* functions moved into libc (LOADSCAN_GLIBC_FLOOR
  # to check against another).
  GLIBC_FLOOR = ENV.fetch("LOADSCAN_GLIBC_FLOOR", "2.34")
  # Where the gems go (LOADSCAN_NATIVE_PKG to put them elsewhere, as the tests do).
  PKG = ENV.fetch("LOADSCAN_NATIVE_PKG", File.join(ROOT, "pkg"))

  # One library of a native gem: the Ruby minor it was built for, and the built file.
  # `dev`: built by a development Ruby (RUBY_PATCHLEVEL -1, a version such as 4.1.0.dev).
  Build = Struct.new(:minor, :library, :dev)

  module_function

  def capture(*cmd)
    out, status = Open3.capture2(*cmd)
    raise "#{cmd.join(" ")} failed" unless status.success?

    out
  end

  def minor_of(*ruby) = capture(*ruby, "--disable-gems", "-e", 'print RUBY_VERSION[/\A\d+\.\d+/]')
  def dev?(*ruby) = capture(*ruby, "--disable-gems", "-e", "print RUBY_PATCHLEVEL.negative?") == "true"

  # The host's libraries: `rake compile` with each Ruby of the matrix (its own cargo target dir,
  # target/ruby-<minor>, so a warm one rebuilds nothing).
  def host_builds
    path = ENV.fetch("PATH").split(":").grep_v(%r{\A/opt/rubies/})
    RUBIES.map do |bin|
      ruby = File.join(bin, "ruby")
      raise "no Ruby at #{ruby} (LOADSCAN_NATIVE_RUBIES lists the matrix's bin dirs)" unless File.executable?(ruby)

      env = { "PATH" => [bin, *path].join(":"), "CARGO_TARGET_DIR" => nil, "RUBYOPT" => nil, "RUBYLIB" => nil }
      system(env, ruby, "-S", "rake", "compile", chdir: ROOT, exception: true)
      minor = minor_of(ruby)
      Build.new(minor, File.join(ROOT, "lib", "loadscan", minor, "loadscan.so"), dev?(ruby))
    end
  end

  # aarch64, cross-built for each Ruby of AARCH64_RUBIES: cargo for the aarch64 target, linked by
  # Debian's cross gcc, against that Ruby's RbConfig (a wrapper runs it under qemu-user for rb-sys),
  # in a target dir of its own (target/aarch64-ruby-<minor>, kept by bin/cargo-cache).
  def aarch64_builds
    missing = AARCH64_RUBIES.reject { |ruby| File.executable?(ruby) }
    raise "no aarch64 Ruby at #{missing.join(", ")} (bin/setup unpacks them)" unless missing.empty?

    AARCH64_RUBIES.map { |ruby| aarch64_build(ruby) }
  end

  def aarch64_build(ruby)
    minor = minor_of(*QEMU, ruby)
    # Named after the Ruby's install (ruby-3.1-arm64, ruby-3.4.5-aarch64): rb-sys reruns its build
    # script when RUBY names another one, not when a wrapper's contents change.
    name = File.basename(ruby.delete_suffix("/usr/bin/ruby3.1").delete_suffix("/bin/ruby"))
    wrapper = File.join(ROOT, "tmp", "native", name)
    FileUtils.mkdir_p(File.dirname(wrapper))
    File.write(wrapper, "#!/bin/sh\nexec #{QEMU.join(" ")} #{ruby} \"$@\"\n")
    File.chmod(0o755, wrapper)
    target_dir = File.join(ROOT, "target", "aarch64-ruby-#{minor}")
    env = { "RUBY" => wrapper, "CARGO_TARGET_DIR" => target_dir,
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER" => "aarch64-linux-gnu-gcc" }
    system(env, "cargo", *Loadscan::CargoBuild::ARGS, "--target", AARCH64_TARGET, chdir: ROOT, exception: true)
    Build.new(minor, File.join(target_dir, AARCH64_TARGET, "release", "libloadscan.so"))
  end

  # RubyGems installs the gem only on the Rubies it holds a library for: from the lowest minor to
  # below the one after the highest, minus the gaps between shipped minors of one major (3.2
  # between 3.1 and 3.3; 3.4 was the last 3.x, 4.0 the next). Any other Ruby gets the source gem.
  # A library built by a development Ruby of the lowest minor (`dev`: 4.1.0.dev) admits it too.
  def ruby_requirement(minors, dev: [])
    versions = minors.map { |m| Gem::Version.new(m) }.sort
    high = versions.last.segments
    low = dev.include?(versions.first.to_s) ? "#{versions.first}.a" : versions.first
    gaps = versions.group_by { |v| v.segments[0] }.flat_map do |major, of_major|
      (of_major.first.segments[1]..of_major.last.segments[1]).map { |minor| "#{major}.#{minor}" }
    end - minors
    [">= #{low}", "< #{high[0]}.#{high[1] + 1}",
     *gaps.flat_map { |gap| Array.new(GAP_RELEASES) { |patch| "!= #{gap}.#{patch}" } }]
  end

  # The highest GLIBC_ symbol version the libraries need: the oldest glibc they load on.
  def glibc_floor(libraries)
    libraries.flat_map { |lib| capture("readelf", "--version-info", "--wide", lib).scan(/GLIBC_(\d+(?:\.\d+)+)/) }
             .flatten.max_by { |v| Gem::Version.new(v) }
  end

  # Writes pkg/loadscan-<version>-<platform>.gem from a staging copy of the gemspec's files minus
  # the Rust sources, plus the stripped libraries; prints its size and glibc floor. Returns its path.
  def package(platform, builds, strip:)
    Dir.mktmpdir("loadscan-native") { |stage| package_in(stage, platform, builds, strip) }
  end

  def package_in(stage, platform, builds, strip)
    # (A copy: RubyGems caches loaded specs, and this one is changed below.)
    spec = Dir.chdir(ROOT) { Gem::Specification.load("loadscan.gemspec") }.dup
    files = spec.files.grep_v(%r{\A(ext/|Cargo\.)})
    files.each do |f|
      FileUtils.mkdir_p(File.dirname(File.join(stage, f)))
      FileUtils.cp(File.join(ROOT, f), File.join(stage, f), preserve: true)
    end
    builds.each do |build|
      rel = "lib/loadscan/#{build.minor}/loadscan.so"
      FileUtils.mkdir_p(File.dirname(File.join(stage, rel)))
      capture(strip, "--strip-unneeded", "-o", File.join(stage, rel), build.library)
      files << rel
    end
    # `<cpu>-linux-gnu`: RubyGems 3.4 and later install it on glibc only (musl takes the source
    # gem); older ones (Debian 12's 3.3.15) read it as `<cpu>-linux`. Given as parts, so that a
    # build with such an older RubyGems keeps the `-gnu` it would fold away when parsing a String.
    spec.platform = Gem::Platform.new(platform.split("-", 3))
    spec.extensions = []
    spec.files = files.sort
    spec.required_ruby_version = ruby_requirement(builds.map(&:minor), dev: builds.select(&:dev).map(&:minor))
    floor = glibc_floor(builds.map(&:library))
    if Gem::Version.new(floor) > Gem::Version.new(GLIBC_FLOOR)
      raise "the #{platform} libraries need glibc #{floor}, above the supported floor #{GLIBC_FLOOR} (README, \"Install\")"
    end
    FileUtils.mkdir_p(PKG)
    out = File.join(PKG, spec.file_name)
    Dir.chdir(stage) { Gem::Package.build(spec, false, false, out) }
    puts format("%s: %.1f MB (Ruby %s), needs glibc >= %s", out.delete_prefix("#{ROOT}/"), File.size(out) / 1e6,
                builds.map(&:minor).join(", "), floor)
    out
  end
end
