# frozen_string_literal: true
# Scan throughput on the fixture trees' load-path entries (app dirs + gem/package lib dirs):
#
#   ruby bench/scan.rb [--gems 100,200,400,800] [--[no-]debian] [--runs N] [--reps N] [--quick]
#
# Scanners: c_floor (bench/c/walk.c, readdir + d_type, gcc -O2), loadscan walk1/walk2
# (scan_roots with threads=1/2), loadscan serial (scan_serial: the stat-per-entry serial walker),
# bootsnap (Bootsnap::LoadPathCache::PathScanner.call per entry, in Ruby). Each is timed
# in-process around the scan only; every run is a fresh process doing --reps scans, the run's
# sample is the median of its reps. Runs alternate scanners round by round.
#
# A second table replays a recorded boot (the features a stock boot required, in order, from
# the recorded map) against a fresh index (ext/loadscan-core/examples/lazy.rs): boot_lazy lists
# each entry's own directory and then only what the lookups need; boot_eager1/2 scan
# everything first (1 or 2 threads). Time = sync + every lookup.
#
# The page cache cannot be dropped here (no root-only drop_caches in containers, and it
# would not be representative of a boot either): every tree is walked once first, so these
# are WARM page-cache (dentry/inode cache) numbers.
require "optparse"
require "fileutils"
require "open3"
require_relative "support/runner"
require_relative "support/fixtures"

module Bench
  module Scan
    SCANNERS = %w[c_floor walk1 walk2 serial bootsnap].freeze
    BOOT_MODES = { "boot_lazy" => %w[lazy 1], "boot_eager1" => %w[eager 1], "boot_eager2" => %w[eager 2] }.freeze

    module_function

    def build
      cbin = File.join(OUT_DIR, "walk")
      FileUtils.mkdir_p(OUT_DIR)
      src = File.join(ROOT, "bench", "c", "walk.c")
      system("gcc", "-O2", "-o", cbin, src) or abort("bench: gcc -O2 #{src} failed")
      env = { "PATH" => "#{Dir.home}/.cargo/bin:#{ENV.fetch("PATH", "")}" }
      target = ENV.fetch("CARGO_TARGET_DIR", File.join(ROOT, "target"))
      rust = File.join(target, "release", "examples", "scan")
      unless system(env, "cargo", "build", "--release", "--quiet", "--example", "scan", "--example", "lazy", "-p", "loadscan-core", chdir: ROOT)
        abort("bench: cargo build --release --example scan -p loadscan-core failed") unless File.executable?(rust)
        warn "bench: cargo build failed; using the previously built #{rust} (#{File.mtime(rust)})"
      end
      { c: cbin, rust: rust, lazy: File.join(target, "release", "examples", "lazy") }
    end

    def roots_file(fx)
      path = File.join(OUT_DIR, "roots-#{fx[:name]}.txt")
      File.write(path, Fixtures.manifest(fx)[:load_path].join("\n") + "\n")
      path
    end

    def argv(bins, scanner, roots, reps)
      case scanner
      when "c_floor" then [bins[:c], roots, reps.to_s]
      when "bootsnap" then [RUBY, File.join(__dir__, "support", "bootsnap_scan.rb"), roots, reps.to_s]
      else [bins[:rust], roots, scanner, reps.to_s]
      end
    end

    # One fresh process: median scan ns of its reps, and the files it reported.
    def sample(cmd)
      out, err, st = Open3.capture3(*cmd)
      raise "#{cmd.join(" ")} failed: #{err}" unless st.success?

      lines = out.lines.map { |l| l.split.map(&:to_i) }
      [Stats.median(lines.map(&:first)), lines.first]
    end

    # The features a stock boot required, in order (keys of the recorded map), one per line.
    def features_file(fx)
      map = Marshal.load(File.binread(Fixtures.ensure_recorded_map(fx))) # rubocop:disable Security/MarshalLoad
      path = File.join(OUT_DIR, "features-#{fx[:name]}.txt")
      File.write(path, map.keys.join("\n") + "\n")
      path
    end

    # Replays the recorded boot: [{fixture:, mode:, median_ms:, dirs_listed:, vs_eager1:}].
    def run_boot_replay(bins, fx, roots, runs, reps)
      features = features_file(fx)
      times = BOOT_MODES.keys.to_h { |m| [m, []] }
      listed = {}
      runs.times do |r|
        BOOT_MODES.keys.rotate(r % BOOT_MODES.size).each do |m|
          out, err, st = Open3.capture3(bins[:lazy], roots, features, *BOOT_MODES[m], reps.to_s)
          raise "lazy replay failed: #{err}" unless st.success?

          lines = out.lines.map { |l| l.split.map(&:to_i) }
          times[m] << Stats.median(lines.map { |l| l[0] + l[1] }) / 1e9
          listed[m] = lines.first[2]
        end
      end
      BOOT_MODES.keys.map do |m|
        { fixture: fx[:name], mode: m, median_ms: Stats.median(times[m]) * 1000, dirs_listed_lazily: listed[m],
          vs_eager1: Stats.paired_ratio(times[m], times["boot_eager1"]), times_ms: times[m].map { |t| (t * 1000).round(3) } }
      end
    end

    def run(fixtures:, runs:, reps:, regen: false)
      bins = build
      results = []
      replays = []
      fixtures.each do |name|
        fx = Fixtures.ensure(name, regen: regen)
        roots = roots_file(fx)
        # warm the page cache (and count the tree with the floor walker)
        _, c_line = sample(argv(bins, "c_floor", roots, 2))
        tree_files = c_line[1]
        counts = {}
        times = SCANNERS.to_h { |s| [s, []] }
        runs.times do |r|
          SCANNERS.rotate(r % SCANNERS.size).each do |s|
            ns, line = sample(argv(bins, s, roots, reps))
            times[s] << ns / 1e9
            counts[s] = line
          end
        end
        SCANNERS.each do |s|
          med = Stats.median(times[s])
          results << { fixture: name, scanner: s, tree_files: tree_files, median_ms: med * 1000,
                       files_per_ms: tree_files / (med * 1000), vs_c_floor: Stats.paired_ratio(times[s], times["c_floor"]),
                       times_ms: times[s].map { |t| (t * 1000).round(3) }, reported: counts[s] }
        end
        replays.concat(run_boot_replay(bins, fx, roots, runs, reps)) if name.start_with?("gems-")
        warn "bench: scan #{name} done"
      end
      { results: results, replays: replays }
    end

    def report(data)
      rows = data[:results].map do |r|
        [r[:fixture], r[:scanner], r[:tree_files], format("%.1f", r[:median_ms]), format("%.0f", r[:files_per_ms]),
         r[:scanner] == "c_floor" ? "1" : Runner.fmt_ratio(r[:vs_c_floor])]
      end
      text = "Scan of every load-path entry of the fixture (warm page cache). files = regular files in the tree\n" \
             "(C walker's count); time / C floor with 99% CI (t-interval on paired log ratios)\n" +
             Runner.table(%w[fixture scanner files median_ms files_per_ms time_vs_c_floor], rows)
      return text if data[:replays].empty?

      rrows = data[:replays].map do |r|
        [r[:fixture], r[:mode], r[:dirs_listed_lazily], format("%.1f", r[:median_ms]),
         r[:mode] == "boot_eager1" ? "1" : Runner.fmt_ratio(r[:vs_eager1])]
      end
      text + "\n\nA recorded boot replayed on a fresh index: sync + every lookup (lazy: directories listed on\n" \
             "demand, counted; eager: everything scanned first)\n" +
        Runner.table(%w[fixture mode dirs_listed_lazily median_ms time_vs_eager1], rrows)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = Bench::Runner.parse("usage: ruby bench/scan.rb [--gems 100,200] [--[no-]debian] [--runs N] [--reps N] [--quick]",
                             { gems: [100, 200, 400, 800], debian: nil, runs: 7, reps: 3, regen: false }) do |o, opts|
    o.on("--gems LIST", Array) { |v| opts[:gems] = v.map { |s| Integer(s) } }
    o.on("--[no-]debian") { |v| opts[:debian] = v }
    o.on("--runs N", Integer) { |v| opts[:runs] = v }
    o.on("--reps N", Integer) { |v| opts[:reps] = v }
    o.on("--quick") { opts.merge!(gems: [200], runs: 3, debian: false) }
    o.on("--regen") { opts[:regen] = true }
  end
  fixtures = opts[:gems].map { |n| "gems-#{n}" }
  fixtures << "debian" if opts[:debian].nil? ? Bench::Fixtures.debian_available? : opts[:debian]
  data = Bench::Scan.run(fixtures: fixtures, runs: opts[:runs], reps: opts[:reps], regen: opts[:regen])
  text = Bench::Scan.report(data)
  Bench::Runner.publish("scan", text, data.merge(table: text, at: Time.now.utc.to_s, ruby: RUBY_DESCRIPTION))
end
