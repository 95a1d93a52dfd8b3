# frozen_string_literal: true

require "fileutils"
require_relative "runner"
require_relative "fixtures"
require_relative "../../fixtures/rails_app"
require_relative "instructions"

module Bench
  # The Rails 7.2 app of bench/rails.rb and the gate: `rails new` with the stack bin/setup-rails-gems
  # sets up from Debian's archive (fixtures/rails_app.rb; Bootsnap 1.26.1 on Ruby 3.3.8 only), made
  # once per Ruby under tmp/bench/fixtures/ruby-<minor>/rails72, booted five ways by `bin/rails runner`
  # (on a Ruby whose stack has no Bootsnap, the three that load it are left out):
  # - stock: no Bootsnap, no loadscan (config/boot.rb's `require "bootsnap/setup"` skipped);
  # - bootsnap: the app as generated (Bootsnap's load-path cache and compile cache);
  # - loadscan+compile_cache: what `loadscan install` makes of a generated app (README, "Coming
  #   from Bootsnap"): loadscan set up after Bundler (engaged, it turns Bootsnap's
  #   load-path cache off), then `require "bootsnap/setup"` (Bootsnap's compile cache only), GC deferred during
  #   the boot as loadscan does by default; and the same with LOADSCAN_GC=off (GC as in the
  #   others, to tell the load-path cache's share from the deferral's);
  # - loadscan: loadscan alone (Bootsnap's line skipped);
  # - loadscan_first: loadscan set up on config/boot.rb's first line, before `bundler/setup` (its
  #   compile cache serves Bundler's files too), then Bootsnap as generated (its YAML cache; its
  #   load-path and iseq caches left to loadscan's);
  # - load_path_half: loadscan alone set up after Bundler with its compile cache off
  #   (LOADSCAN_COMPILE_CACHE=0): the load-path index and GC deferral only, as before the
  #   compile cache (Bootsnap's line skipped);
  # - loadscan_first_alone: loadscan on config/boot.rb's first line with its compile cache, no
  #   Bootsnap at all (the line after Bundler then finds it set up).
  # Each has its own cache dirs, kept between runs (warm once filled).
  module RailsApp
    BOOTS = {
      "stock" => { "BENCH_BOOTSNAP" => "0" },
      "bootsnap" => {},
      "loadscan+compile_cache" => { "BENCH_LOADSCAN" => "1" },
      "loadscan+compile_cache,gc_off" => { "BENCH_LOADSCAN" => "1", "LOADSCAN_GC" => "off" },
      "loadscan" => { "BENCH_LOADSCAN" => "1", "BENCH_BOOTSNAP" => "0" },
      "loadscan_first" => { "BENCH_LOADSCAN" => "1", "BENCH_LOADSCAN_FIRST" => "1" },
      "load_path_half" => { "BENCH_LOADSCAN" => "1", "BENCH_BOOTSNAP" => "0", "LOADSCAN_COMPILE_CACHE" => "0" },
      "loadscan_first_alone" => { "BENCH_LOADSCAN" => "1", "BENCH_LOADSCAN_FIRST" => "1", "BENCH_BOOTSNAP" => "0" },
    }.freeze
    LABELS = { "stock" => "stock", "bootsnap" => "Bootsnap (full)",
               "loadscan+compile_cache" => "loadscan + Bootsnap's compile cache",
               "loadscan+compile_cache,gc_off" => "the same, LOADSCAN_GC=off", "loadscan" => "loadscan alone",
               "loadscan_first" => "loadscan on boot.rb's first line + Bootsnap",
               "load_path_half" => "loadscan after Bundler, no compile cache",
               "loadscan_first_alone" => "loadscan on boot.rb's first line alone" }.freeze
    DIR = File.join(Fixtures::DIR, "rails72")
    REPORTS = File.join(OUT_DIR, "rails")

    module_function

    def missing = ::Fixtures::RailsApp.missing

    # Whether this Ruby's stack has Bootsnap (1.26.1 on Ruby 3.3.8): without it the app is generated
    # with `--skip-bootsnap`, and only stock and loadscan alone boot.
    def bootsnap? = ::Fixtures::RailsApp.bootsnap?

    BOOTSNAP_LINE = 'require "bootsnap/setup" unless ENV["BENCH_BOOTSNAP"] == "0" # Speed up boot time by caching expensive operations.'

    # The app (generated when missing, when fixtures/rails_app.rb changed, or for another Ruby or
    # gem set), with the bench's config/boot.rb.
    def ensure(regen: false)
      stamp = File.join(DIR, ".generated-by")
      want = [Fixtures.ruby_stamp, File.read(File.join(::Fixtures::RailsApp.home, ".complete"))].join("\n")
      fresh = File.exist?(stamp) && File.read(stamp) == want &&
              File.mtime(stamp) >= File.mtime(File.join(ROOT, "fixtures", "rails_app.rb"))
      if regen || !fresh
        warn "bench: generating the Rails app in #{DIR}"
        ::Fixtures::RailsApp.generate(out: DIR)
        File.write(stamp, want)
        FileUtils.rm_rf(caches)
      end
      write_boot
      DIR
    end

    def caches = File.join(Fixtures::DIR, "rails72-caches")

    # The generated config/boot.rb with loadscan's lines as `loadscan install` writes them (after
    # Bundler's; loadscan from this checkout, or BENCH_LOADSCAN_LIB, by absolute path: the app's
    # Gemfile does not name it), when BENCH_LOADSCAN=1, and the report hook first; between them,
    # BOOT_PRELUDE when set, as the fixtures' boot.rb loads it (bench/syscalls.rb loads the empty
    # stock prelude there: what fails before it, no cache set up after Bundler could answer); and in
    # config/application.rb, after `Bundler.require`, loadscan's railtie, which the Gemfile line
    # `loadscan install` adds (`require: "loadscan/railtie"`) would load there: it ends the boot
    # (GC deferred until then) at after_initialize.
    def write_boot
      lib = ENV["BENCH_LOADSCAN_LIB"].to_s.empty? ? File.join(ROOT, "lib") : ENV["BENCH_LOADSCAN_LIB"]
      File.write(File.join(DIR, "config", "boot.rb"), <<~RUBY)
        # Written by bench/support/rails_app.rb: the generated config/boot.rb, plus loadscan when
        # BENCH_LOADSCAN=1, Bootsnap unless BENCH_BOOTSNAP=0, and the boot report when asked.
        load #{File.join(ROOT, "bench", "support", "boot_report.rb").inspect} if ENV["BENCH_BOOT_REPORT"]
        require #{File.join(lib, "loadscan", "setup").inspect} if ENV["BENCH_LOADSCAN_FIRST"] == "1" # before Bundler
        ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)

        require "bundler/setup" # Set up gems listed in the Gemfile.
        load ENV["BOOT_PRELUDE"] if ENV["BOOT_PRELUDE"] && !ENV["BOOT_PRELUDE"].empty?
        if ENV["BENCH_LOADSCAN"] == "1"
          require #{File.join(lib, "loadscan", "setup").inspect} # engaged, it turns Bootsnap's load-path cache off
        end
        #{BOOTSNAP_LINE if bootsnap?}
        #{PINS.chomp}
      RUBY
      app = File.join(DIR, "config", "application.rb")
      text = File.read(app)
      line = %(require #{File.join(lib, "loadscan", "railtie").inspect} if ENV["BENCH_LOADSCAN"] == "1" # the Gemfile's `require:`\n)
      return if text.include?(line)

      text = text.sub(/^(Bundler\.require.*\n)/) { "#{$1}#{line}" }
      raise "#{app}: no Bundler.require line" unless text.include?(line)

      File.write(app, text)
    end

    # Under callgrind a boot runs some 50 times slower than it does, long enough to reach limits
    # in wall time that a real boot never comes near, at random points: in development
    # Bootsnap's load-path cache rebuilds itself when older than AGE_THRESHOLD (30 s of the
    # process's life) at a `require` (full Bootsnap counted 2,263–2,299 M, allocations differing
    # by 1,700 objects, where loadscan's boot repeats to 0.05%), and loadscan's GC deferral ends
    # after BootGC::MAX_SECONDS (60 s). Counted boots (PIN) raise both to an hour. And callgrind's
    # own memory is resident in the process: loadscan's deferral took its growth for the app's and
    # ran (and ended, as `memory`) early, so counted boots raise BootGC::RESIDENT_BUDGET from 64 MiB
    # by the 32 MiB the tool grows in a boot. Raised to 4 GiB, the development boot had no budget
    # run where its plain boot has one (1,975.7 M against 2,002.0 M on 3.3.8); at 96 MiB both
    # environments' counted boots have their plain boots' runs, as bench/rails.rb checks (`gc_check`).
    PINS = <<~RUBY
      if ENV["BENCH_PIN_RESIDENT"] && defined?(Loadscan::BootGC::RESIDENT_BUDGET)
        Loadscan::BootGC.send(:remove_const, :RESIDENT_BUDGET)
        Loadscan::BootGC.const_set(:RESIDENT_BUDGET, Integer(ENV["BENCH_PIN_RESIDENT"]))
      end
      if (pin = ENV["BENCH_PIN_SECONDS"])
        if defined?(Bootsnap::LoadPathCache) && Bootsnap::LoadPathCache.enabled?
          Bootsnap::LoadPathCache::Cache.send(:remove_const, :AGE_THRESHOLD)
          Bootsnap::LoadPathCache::Cache.const_set(:AGE_THRESHOLD, Integer(pin))
        end
        if defined?(Loadscan::BootGC::MAX_SECONDS)
          Loadscan::BootGC.send(:remove_const, :MAX_SECONDS)
          Loadscan::BootGC.const_set(:MAX_SECONDS, Float(pin))
        end
      end
    RUBY
    PIN = { "BENCH_PIN_SECONDS" => "3600", "BENCH_PIN_RESIDENT" => (96 << 20).to_s }.freeze

    # The boots of `bin/rails runner CODE` in `rails_env` (BOOTS: those without Bootsnap where this
    # Ruby's stack has none), as Variants (cache dirs per boot and environment; `only`: names to keep;
    # `app`: another copy of the app, bench/ci.rb's, with caches of its own).
    def variants(rails_env: "development", code: "nil", only: nil, app: DIR, caches: self.caches)
      base = ::Fixtures::RailsApp.env(app).merge(rails_env == "production" ? ::Fixtures::RailsApp.production : { "RAILS_ENV" => rails_env })
      BOOTS.filter_map do |name, env|
        next if only && !only.include?(name)
        next if !bootsnap? && env["BENCH_BOOTSNAP"] != "0"

        dir = File.join(caches, rails_env, name)
        FileUtils.mkdir_p(dir, mode: 0o700)
        env = base.merge(env).merge("BOOTSNAP_CACHE_DIR" => dir, "LOADSCAN_CACHE_DIR" => File.join(dir, "loadscan"))
        Variant.new(name: name, env: env, argv: [RUBY, "bin/rails", "runner", code], chdir: app)
      end
    end

    # Runs each variant `times` times, untimed (fills its caches).
    def warm(variants, times: 2)
      variants.each { |v| times.times { Runner.time_once(v.env, v.argv, chdir: v.chdir) } }
    end

    # The boot report (bench/support/boot_report.rb) of one run; `profile`: with each GC run's cause.
    # A boot meant to run loadscan where it stayed off (no build for this Ruby: `rake compile`)
    # stops the bench: it would be timed as stock's under loadscan's name.
    def report(variant, tag, profile: false)
      out = report_path(variant, tag)
      Runner.time_once(variant.env.merge(report_env(out, profile)), variant.argv, chdir: variant.chdir)
      load_report(out).tap do |r|
        next unless variant.env["BENCH_LOADSCAN"] == "1" && r[:hits].nil?

        abort "bench: loadscan was not active in the #{variant.name} boot (its warning is above)"
      end
    end

    def report_path(variant, tag)
      FileUtils.mkdir_p(REPORTS)
      File.join(REPORTS, "#{tag}-#{variant.name}.marshal").tap { |f| FileUtils.rm_f(f) }
    end

    def report_env(out, profile) = { "BENCH_BOOT_REPORT" => out, "BENCH_GC_PROFILE" => profile ? "1" : nil }

    def load_report(out) = Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad

    # {name => {instructions:, report:}} of one warm run of each variant under callgrind (`jobs` at
    # a time), with the GC counts of that very run.
    def instructions(variants, tag, jobs:)
      outs = variants.to_h { |v| [v.name, report_path(v, "#{tag}-callgrind")] }
      counted = variants.map { |v| v.dup.tap { |c| c.env = v.env.merge(report_env(outs[v.name], false), PIN) } }
      counts = Instructions.count_all(counted, "rails-#{RUBY_VERSION}-#{tag}", jobs: jobs)
      counts.to_h { |name, n| [name, { instructions: n, report: load_report(outs[name]) }] }
    end

    # The boots whose GC deferral ended otherwise, or after other budget runs, under callgrind than
    # in their plain profiled boot: 'loadscan_first: ["memory", 2] counted, ["rails", 1] plain', or
    # nil when all match.
    def gc_check(counted, profiled)
      off = counted.filter_map do |name, c|
        n, plain = c[:report][:deferral], profiled[name][:deferral]
        "#{name}: #{n.inspect} counted, #{plain.inspect} plain" if n != plain
      end
      off.empty? ? nil : off.join("; ")
    end

    # "17 (12 minor, 5 major: nofree, oldgen×4)": a report's GC runs, with the causes of the major
    # ones when it was profiled (runs before config/boot.rb have no cause).
    def gc_summary(report, profiled = nil)
      g = report[:gc]
      text = "#{g[:count]} (#{g[:minor]} minor, #{g[:major]} major"
      runs = (profiled || report)[:gc_runs]
      if runs
        causes = runs.filter_map { |r| r[:major_by] }.tally.map { |c, n| n > 1 ? "#{c}×#{n}" : c.to_s }
        early = g[:major] - runs.count { |r| r[:major_by] }
        causes << "#{early} before boot.rb" if early.positive?
        text << ": #{causes.join(", ")}" unless causes.empty?
      end
      "#{text})"
    end

    # The features a boot loaded that stock did not, and those it did not load that stock did,
    # leaving out Bootsnap's, msgpack's and loadscan's own files.
    def features_vs_stock(report, stock)
      own = %r{/(?:bootsnap|msgpack)-[^/]+/|\A#{Regexp.escape(File.join(ROOT, "lib"))}/|/bench/support/}
      mine = report[:loaded_features].grep_v(own)
      theirs = stock[:loaded_features].grep_v(own)
      { extra: mine - theirs, missing: theirs - mine }
    end

    # The gate's Rails figures: a warm development boot of full Bootsnap and of loadscan +
    # Bootsnap's compile cache (GC deferred, and LOADSCAN_GC=off), counted under callgrind (with
    # the GC runs of those boots, their causes from a profiled boot of each), and what each loaded
    # against a stock boot's features.
    def gate_figures(jobs:)
      RailsApp.ensure
      vs = variants(only: %w[stock bootsnap loadscan+compile_cache loadscan+compile_cache,gc_off])
      warm(vs, times: 1)
      profiled = vs.to_h { |v| [v.name, report(v, "gate-profiled", profile: true)] }
      counted = instructions(vs.reject { |v| v.name == "stock" }, "gate", jobs: jobs)
      counted.to_h do |name, c|
        [name, c.merge(gc: gc_summary(c[:report], profiled[name]), features: features_vs_stock(profiled[name], profiled["stock"]))]
      end
    end
  end
end
