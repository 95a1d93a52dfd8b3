# frozen_string_literal: true

require "fileutils"
require_relative "runner"

module Bench
  # The benchmark's own copies of the fixture trees (tmp/bench/fixtures/…), generated on
  # first use by fixtures/app.rb and fixtures/debian_tree.rb, plus the oracle maps.
  module Fixtures
    DIR = File.join(OUT_DIR, "fixtures")
    PRELUDES = File.join(ROOT, "bench", "preludes")

    module_function

    # Name, root dir and boot.rb of a fixture: "gems-200" or "debian".
    def ensure(name, regen: false)
      root = File.join(DIR, name)
      boot = File.join(root, "boot.rb")
      generators = Dir[File.join(ROOT, "fixtures", "*.rb")].map { |f| File.mtime(f) }.max
      if regen || !File.exist?(boot) || File.mtime(boot) < generators
        warn "bench: generating fixture #{name} in #{root}"
        ok = if name == "debian"
               system(RUBY, File.join(ROOT, "fixtures", "debian_tree.rb"), "--out", root, out: File::NULL)
             elsif (n = name[/\Agems-(\d+)\z/, 1])
               system(RUBY, File.join(ROOT, "fixtures", "app.rb"), "--out", root, "--gems", n, out: File::NULL)
             else
               raise ArgumentError, "unknown fixture #{name}"
             end
        raise "fixture #{name}: generator failed" unless ok
        FileUtils.rm_f(oracle_map(name))
      end
      { name: name, root: root, boot: boot, app: File.join(root, "app"), gems: File.join(root, "gems") }
    end

    # Whether the Debian packages the realistic tree is built from are installed.
    def debian_available?
      system(RUBY, File.join(ROOT, "fixtures", "debian_tree.rb"), "--check", out: File::NULL, err: File::NULL)
    end

    def oracle_map(name) = File.join(OUT_DIR, "oracle", "#{name}.marshal")

    # The feature→absolute path map of a stock boot, recorded once (bench/preludes/record.rb).
    def ensure_oracle(fx)
      map = oracle_map(fx[:name])
      return map if File.exist?(map) && File.mtime(map) >= File.mtime(fx[:boot])

      FileUtils.mkdir_p(File.dirname(map))
      Runner.time_once(gem_env(fx).merge("BOOT_PRELUDE" => prelude("record"), "BENCH_ORACLE_OUT" => map), [RUBY, fx[:boot]])
      map
    end

    def prelude(name) = File.join(PRELUDES, "#{name}.rb")

    # The fixture's gems are installed gems, as under Bundler: on GEM_PATH, so Bootsnap and
    # loadscan both treat them as stable (one check per entry, not per directory).
    def gem_env(fx)
      { "GEM_PATH" => [fx[:gems], *Gem.path].join(File::PATH_SEPARATOR) }
    end

    # Sets the mtime of every file and directory under dir to a new time (as a fresh
    # `git checkout` would): the current time, so each call (a boot apart) differs.
    def touch_tree(dir)
      t = Time.now
      paths = Dir.glob("**/*", File::FNM_DOTMATCH, base: dir).reject { |p| p.end_with?("/.", "/..") || p == "." }
      paths.each { |p| File.utime(t, t, File.join(dir, p)) }
      File.utime(t, t, dir)
    end
  end
end
