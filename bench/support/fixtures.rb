# frozen_string_literal: true

require "fileutils"
require_relative "runner"

module Bench
  # The benchmark's own copies of the fixture trees (tmp/bench/fixtures/…), generated on
  # first use by fixtures/app.rb and fixtures/debian_tree.rb, plus the recorded maps.
  module Fixtures
    # One set per Ruby minor (tmp/bench/fixtures/ruby-3.1/gems-200): a fixture's C extensions
    # link that Ruby's libruby and its Gemfile.lock names that Ruby's Bundler, so benchmarks on
    # two Rubies at once do not regenerate each other's trees.
    RUBY_TAG = "ruby-#{RUBY_VERSION[/\A\d+\.\d+/]}"
    DIR = File.join(OUT_DIR, "fixtures", RUBY_TAG)
    PRELUDES = File.join(ROOT, "bench", "preludes")

    module_function

    # Name, root dir and boot.rb of a fixture:
    # - "gems-N": the generated app as a real Bundler app (fixtures/bundle.rb: N installed gems in
    #   a gem home inside the fixture, a Gemfile.lock, boot.rb starting with `require "bundler/setup"`);
    # - "plain-N": the same app with its gem dirs put on $LOAD_PATH by hand (fixtures/app.rb, the
    #   fixture of sessions 1–3: no Bundler at boot);
    # - "debian": the Debian-packages tree (fixtures/debian_tree.rb, dirs put on $LOAD_PATH by hand).
    # Generated on first use, again when a generator changed, and again when another Ruby asks for
    # it (the C extensions are built against, and the Gemfile.lock locked by, the Ruby that generated it).
    def ensure(name, regen: false)
      root = File.join(DIR, name)
      boot = File.join(root, "boot.rb")
      stamp = File.join(root, ".generated-by")
      generators = Dir[File.join(ROOT, "fixtures", "*.rb")].map { |f| File.mtime(f) }.max
      fresh = File.exist?(boot) && File.mtime(boot) >= generators && File.exist?(stamp) && File.read(stamp) == ruby_stamp
      if regen || !fresh
        warn "bench: generating fixture #{name} in #{root}"
        n = name[/\A(?:gems|plain)-(\d+)\z/, 1]
        script = if name == "debian" then ["debian_tree.rb"]
                 elsif n && name.start_with?("gems-") then ["bundle.rb", "--gems", n]
                 elsif n then ["app.rb", "--gems", n]
                 else raise ArgumentError, "unknown fixture #{name}"
                 end
        FileUtils.rm_rf(root) # the generators wipe only what they write
        ok = system(RUBY, File.join(ROOT, "fixtures", script[0]), "--out", root, *script.drop(1), out: File::NULL)
        raise "fixture #{name}: generator failed" unless ok

        File.write(stamp, ruby_stamp)
        FileUtils.rm_f(recorded_map(name))
      end
      bundle = File.exist?(File.join(root, "bundle.marshal"))
      { name: name, root: root, boot: boot, app: File.join(root, "app"), bundler: bundle,
        gems: bundle ? File.join(root, "gem_home", "gems") : File.join(root, "gems") }
    end

    def ruby_stamp = "#{RUBY} #{RUBY_DESCRIPTION}"

    # A fixture's manifest as its generator wrote it (read once per process):
    # - :tree, app.marshal (fixtures/app.rb) or debian_tree.marshal (fixtures/debian_tree.rb):
    #   {load_path: [the dirs boot.rb puts in front], removed_prefixes: [dirs it drops], …};
    # - :bundle, bundle.marshal (fixtures/bundle.rb): {env: {"BUNDLE_GEMFILE" => …}, gem_dirs:, …}.
    def manifest(fx, kind = :tree)
      glob = { tree: "{app,debian_tree}.marshal", bundle: "bundle.marshal" }.fetch(kind)
      @manifests ||= {}
      @manifests[[fx[:root], kind]] ||= begin
        path = Dir[File.join(fx[:root], glob)].first or raise "fixture #{fx[:name]}: no #{glob} in #{fx[:root]}"
        Marshal.load(File.binread(path)) # rubocop:disable Security/MarshalLoad
      end
    end

    # Whether Bootsnap's prelude can run on this fixture: under Bundler, only when the Gemfile
    # has it (fixtures/bundle.rb adds it when this Ruby has it installed: Debian's, not 3.3's).
    def bootsnap?(fx)
      @bootsnap ||= {}
      @bootsnap.fetch(fx[:root]) do
        @bootsnap[fx[:root]] = if fx[:bundler]
                                 File.read(File.join(fx[:root], "Gemfile")).match?(/^gem "bootsnap"/)
                               else
                                 system(RUBY, "-e", 'require "bootsnap"', out: File::NULL, err: File::NULL)
                               end
      end
    end

    # Whether the Debian packages the realistic tree is built from are installed.
    def debian_available?
      system(RUBY, File.join(ROOT, "fixtures", "debian_tree.rb"), "--check", out: File::NULL, err: File::NULL)
    end

    # Whether the realistic tree boots here: its packages are installed, and this is the Ruby they
    # are Debian's packages for (another Ruby's stock boot of it fails).
    def debian_bootable?
      RbConfig::CONFIG["prefix"] == "/usr" && debian_available?
    end

    def recorded_map(name) = File.join(OUT_DIR, "recorded", RUBY_TAG, "#{name}.marshal")

    # Where a fixture's variants keep their caches.
    def cache_dir(fx) = File.join(OUT_DIR, "cache", RUBY_TAG, fx[:name])

    # The feature→absolute path map of a stock boot, recorded once (bench/preludes/record.rb).
    def ensure_recorded_map(fx)
      map = recorded_map(fx[:name])
      return map if File.exist?(map) && File.mtime(map) >= File.mtime(fx[:boot])

      FileUtils.mkdir_p(File.dirname(map))
      Runner.time_once(gem_env(fx).merge("BOOT_PRELUDE" => prelude("record"), "BENCH_RECORDED_OUT" => map), [RUBY, fx[:boot]])
      map
    end

    def prelude(name) = File.join(PRELUDES, "#{name}.rb")

    # The environment of a boot with Bootsnap's load-path cache in `dir` (its setup arguments are
    # in bench/preludes/bootsnap.rb, the one place they are written).
    def bootsnap_env(dir) = { "BOOT_PRELUDE" => prelude("bootsnap"), "BENCH_BOOTSNAP_DIR" => dir }

    # What a benchmark measured, for its output and JSON: this Ruby, and the Bootsnap that a
    # process with `env` loads (through `bundler/setup` when env names a Gemfile, as the boots do):
    #   {ruby: "3.3.8", rubygems: "3.5.22", bootsnap: "1.26.1", bootsnap_dir: ".../bootsnap-1.26.1/lib",
    #    line: "Ruby 3.3.8 (RubyGems 3.5.22), Bootsnap 1.26.1"}
    # Bootsnap is Debian sid's 1.26.1 on Ruby 3.3.8 (bin/setup-rails-gems; Ruby 3.4's stack has none)
    # and Debian's ruby-bootsnap 1.13 on Debian's Ruby 3.1, the older stack: the line says so.
    def stack(env = {}, chdir: nil)
      code = 'require "bootsnap/version"; print Bootsnap::VERSION, "\n", ' \
             '$LOADED_FEATURES.grep(%r{/bootsnap/version\.rb\z}).first.to_s.delete_suffix("/bootsnap/version.rb")'
      argv = [RUBY, *("-rbundler/setup" if env["BUNDLE_GEMFILE"]), "-e", code]
      out = IO.popen(env, argv, err: File::NULL, **(chdir ? { chdir: chdir } : {}), &:read)
      version, dir = $?.success? ? out.split("\n") : [nil, nil]
      bootsnap = if version.nil? then "no Bootsnap"
                 elsif dir.start_with?("/usr/") then "Debian's Bootsnap #{version} (ruby-bootsnap: the older stack)"
                 else "Bootsnap #{version}"
                 end
      { ruby: RUBY_VERSION, rubygems: Gem::VERSION, bootsnap: version, bootsnap_dir: dir,
        line: "Ruby #{RUBY_VERSION} (RubyGems #{Gem::VERSION}), #{bootsnap}" }
    end

    # The fixture's gems are installed gems: on GEM_PATH, so Bootsnap and loadscan both treat
    # them as stable (one check per entry, not per directory). A Bundler fixture boots with the
    # environment it was locked with (BUNDLE_GEMFILE, GEM_HOME = its gem home, GEM_PATH = that +
    # Ruby's own gem dirs); the others have their gem dirs put on GEM_PATH.
    def gem_env(fx)
      if fx[:bundler]
        manifest(fx, :bundle)[:env]
      else
        { "GEM_PATH" => [fx[:gems], *Gem.path].join(File::PATH_SEPARATOR) }
      end
    end

    # Sets the mtime of every file and directory under dir to a new time (as a fresh
    # `git checkout` would): the current time (or `ago` seconds before it), so each call (a boot
    # apart) differs.
    def touch_tree(dir, ago: 0)
      t = Time.now - ago
      paths = Dir.glob("**/*", File::FNM_DOTMATCH, base: dir).reject { |p| p.end_with?("/.", "/..") || p == "." }
      paths.each { |p| File.utime(t, t, File.join(dir, p)) }
      File.utime(t, t, dir)
    end
  end
end
