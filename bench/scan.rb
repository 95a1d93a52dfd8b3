# frozen_string_literal: true
# Scan throughput on the fixture trees' load-path entries (app dirs + gem/package lib dirs):
#
#   ruby bench/scan.rb [--gems 100,200,400,800] [--[no-]debian] [--runs N] [--reps N] [--quick]
#
# Scanners: c_floor (bench/c/walk.c, readdir + d_type, gcc -O2), loadscan walk1/walk2
# (scan_roots with threads=1/2), loadscan serial (scan_serial: the stat-per-entry oracle),
# bootsnap (Bootsnap::LoadPathCache::PathScanner.call per entry, in Ruby). Each is timed
# in-process around the scan only; every run is a fresh process doing --reps scans, the run's
# sample is the median of its reps. Runs alternate scanners round by round.
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

    module_function

    def build
      cbin = File.join(OUT_DIR, "walk")
      FileUtils.mkdir_p(OUT_DIR)
      src = File.join(ROOT, "bench", "c", "walk.c")
      system("gcc", "-O2", "-o", cbin, src) or abort("bench: gcc -O2 #{src} failed")
      env = { "PATH" => "#{Dir.home}/.cargo/bin:#{ENV.fetch("PATH", "")}" }
      target = ENV.fetch("CARGO_TARGET_DIR", File.join(ROOT, "target"))
      rust = File.join(target, "release", "examples", "scan")
      unless system(env, "cargo", "build", "--release", "--quiet", "--example", "scan", "-p", "loadscan-core", chdir: ROOT)
        abort("bench: cargo build --release --example scan -p loadscan-core failed") unless File.executable?(rust)
        warn "bench: cargo build failed; using the previously built #{rust} (#{File.mtime(rust)})"
      end
      { c: cbin, rust: rust }
    end

    def roots_file(fx)
      m = Marshal.load(File.binread(Dir[File.join(fx[:root], "{app,debian_tree}.marshal")].first))
      path = File.join(OUT_DIR, "roots-#{fx[:name]}.txt")
      File.write(path, m[:load_path].join("\n") + "\n")
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

    def run(fixtures:, runs:, reps:, regen: false)
      bins = build
      results = []
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
        warn "bench: scan #{name} done"
      end
      results
    end

    def report(results)
      rows = results.map do |r|
        [r[:fixture], r[:scanner], r[:tree_files], format("%.1f", r[:median_ms]), format("%.0f", r[:files_per_ms]),
         r[:scanner] == "c_floor" ? "1" : Runner.fmt_ratio(r[:vs_c_floor])]
      end
      "Scan of every load-path entry of the fixture (warm page cache). files = regular files in the tree\n" \
        "(C walker's count); time / C floor with 99% CI (t-interval on paired log ratios)\n" +
        Runner.table(%w[fixture scanner files median_ms files_per_ms time_vs_c_floor], rows)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { gems: [100, 200, 400, 800], debian: nil, runs: 7, reps: 3, regen: false }
  OptionParser.new do |o|
    o.banner = "usage: ruby bench/scan.rb [--gems 100,200] [--[no-]debian] [--runs N] [--reps N] [--quick]"
    o.on("--gems LIST", Array) { |v| opts[:gems] = v.map { |s| Integer(s) } }
    o.on("--[no-]debian") { |v| opts[:debian] = v }
    o.on("--runs N", Integer) { |v| opts[:runs] = v }
    o.on("--reps N", Integer) { |v| opts[:reps] = v }
    o.on("--quick") { opts.merge!(gems: [200], runs: 3, debian: false) }
    o.on("--regen") { opts[:regen] = true }
  end.parse!
  fixtures = opts[:gems].map { |n| "gems-#{n}" }
  fixtures << "debian" if opts[:debian].nil? ? Bench::Fixtures.debian_available? : opts[:debian]
  results = Bench::Scan.run(fixtures: fixtures, runs: opts[:runs], reps: opts[:reps], regen: opts[:regen])
  text = Bench::Scan.report(results)
  puts text
  puts "\nJSON: #{Bench::Runner.write_json("scan", { results: results, table: text, at: Time.now.utc.to_s, ruby: RUBY_DESCRIPTION })}"
end
