#!/usr/bin/env ruby
# frozen_string_literal: true
# Cache benchmark: file size, load + first lookup, lookup ns and RSS added, for indexes of
# 5k, 50k and 200k features, against Bootsnap 1.13's load-path store on the same tree.
#
#   ruby bench/cache.rb [--sizes 5000,50000,200000] [--reps 7]
#
# Each size is a tree of 250 gem-like lib dirs (tmp/bench/cache-trees/N, made once). loadscan:
# a cold boot with LOADSCAN_LAZY=0 writes a cache of every feature; ext/loadscan-core/examples/cache.rs then times
# `store::load` + `Index::from_snapshot` + ranking + the first lookup, in one process, REPS
# times: the median, and the first repetition alone (a fresh process: its buffer's pages are
# faulted in for the first time, as on a real boot). Bootsnap: a boot with Bootsnap writes its store; a fresh Ruby process per rep
# times `Store.new(path)` + the first `get` (MessagePack load of the whole store), and
# separately the whole warm `Bootsnap.setup` + first `find`, as does the loadscan row
# (`Loadscan.setup` + first `lookup`, revalidation included).
require "optparse"
require_relative "support/runner"
require_relative "support/fixtures"

opts = { sizes: [5_000, 50_000, 200_000], reps: 7 }
OptionParser.new do |o|
  o.on("--sizes LIST") { |v| opts[:sizes] = v.split(",").map { |x| Integer(x.delete("_")) } }
  o.on("--reps N", Integer) { |v| opts[:reps] = v }
end.parse!

module Bench
  module CacheBench
    ROOTS = 250
    module_function

    def tree(n)
      dir = File.join(OUT_DIR, "cache-trees", n.to_s)
      roots = (0...ROOTS).map { |r| File.join(dir, "gems", "g#{r}", "lib") }
      stamp = File.join(dir, ".complete")
      unless File.exist?(stamp)
        FileUtils.rm_rf(dir)
        per = n / ROOTS
        roots.each_with_index do |root, r|
          (0...per).each_slice(40).with_index do |slice, d|
            sub = File.join(root, "g#{r}", "d#{d}")
            FileUtils.mkdir_p(sub)
            slice.each { |i| File.write(File.join(sub, "f#{i}.rb"), "") }
          end
        end
        File.write(stamp, "")
      end
      per = n / ROOTS
      features = roots.each_with_index.flat_map { |_, r| [0, per / 3, per - 1].uniq.map { |i| "g#{r}/d#{i / 40}/f#{i}" } }
      [dir, roots, features]
    end

    def ruby(env, code)
      out, status = Open3.capture2(env, RUBY, "-e", code)
      raise "failed: #{code[0, 200]}" unless status.success?

      out
    end

    def median_of(reps) = Stats.median(Array.new(reps) { yield })
  end
end

require "open3"
include Bench # rubocop:disable Style/MixinUsage
rows = []
opts[:sizes].each do |n|
  dir, roots, features = CacheBench.tree(n)
  cache = File.join(dir, "loadscan-cache")
  snap = File.join(dir, "bootsnap-cache")
  FileUtils.rm_rf([cache, snap])
  gem_env = { "GEM_PATH" => [File.join(dir, "gems"), *Gem.path].join(File::PATH_SEPARATOR),
              "LOADSCAN_CACHE_DIR" => cache, "BENCH_BOOTSNAP_DIR" => snap, "RUBYOPT" => nil }
  lib = File.join(ROOT, "lib")
  lp = "$LOAD_PATH.unshift(*#{roots.inspect})"
  # Every directory listed up front (LOADSCAN_LAZY=0), so the cache holds all N features: a lazy
  # boot that looks up only 'x' would list the entries' own directories and nothing below.
  CacheBench.ruby(gem_env.merge("LOADSCAN_LAZY" => "0"),
                  "#{lp}; require #{File.join(lib, "loadscan/setup").inspect}; Loadscan.lookup('x')")
  env_key = CacheBench.ruby(gem_env, "require #{File.join(lib, "loadscan").inspect}; print Loadscan::Config.new.env_key")
  roots_file = File.join(dir, "roots.txt")
  feats_file = File.join(dir, "features.txt")
  File.write(roots_file, roots.join("\n"))
  File.write(feats_file, features.join("\n"))
  system("cargo", "build", "--release", "-q", "--example", "cache", "-p", "loadscan-core", chdir: ROOT, exception: true)
  out = CacheBench.ruby({}, "print `#{File.join(ROOT, "target/release/examples/cache")} #{File.join(cache, "loadscan.cache")} '#{env_key}' #{roots_file} #{feats_file} #{opts[:reps]}`")
  lines = out.lines.map { |l| l.split.map(&:to_f) }
  summary = lines.pop
  load_us = Stats.median(lines.map { |l| (l[0] + l[1]) / 1000.0 })
  fresh_us = (lines.first[0] + lines.first[1]) / 1000.0 # the first rep: a fresh process's page faults

  # Bootsnap set up as the boot benchmarks do it (bench/preludes/bootsnap.rb, cache in BENCH_BOOTSNAP_DIR).
  boot_snap = "load #{Fixtures.prelude("bootsnap").inspect}"
  CacheBench.ruby(gem_env, "#{lp}; #{boot_snap}; Bootsnap::LoadPathCache.load_path_cache.find('x')")
  store = File.join(snap, "bootsnap", "load-path-cache")
  store = Dir[File.join(snap, "**", "load-path-cache")].first unless File.exist?(store)
  bs_load_us = CacheBench.median_of(opts[:reps]) do
    CacheBench.ruby(gem_env, <<~RUBY).to_f
      require "bootsnap"
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      s = Bootsnap::LoadPathCache::Store.new(#{store.inspect})
      s.get(#{roots.first.inspect})
      print (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1e6
    RUBY
  end
  setup = lambda do |code|
    CacheBench.median_of(opts[:reps]) do
      CacheBench.ruby(gem_env, "#{lp}; t = Process.clock_gettime(Process::CLOCK_MONOTONIC); #{code}; " \
                               "print (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1e3").to_f
    end
  end
  ls_setup_ms = setup.call("load #{File.join(lib, "loadscan/setup.rb").inspect}; Loadscan.lookup(#{features.first.inspect})")
  bs_setup_ms = setup.call("#{boot_snap}; Bootsnap::LoadPathCache.load_path_cache.find(#{features.first.inspect})")
  rows << { features: summary[2].to_i, loadscan_bytes: summary[3].to_i, bootsnap_bytes: File.size(store),
            loadscan_load_first_lookup_us: load_us.round(1), loadscan_load_first_lookup_fresh_us: fresh_us.round(1), bootsnap_store_load_first_get_us: bs_load_us.round(1),
            loadscan_lookup_hit_ns: summary[0].round, loadscan_lookup_miss_ns: summary[1].round,
            loadscan_rss_kb: summary[4].to_i, loadscan_setup_ms: ls_setup_ms.round(2), bootsnap_setup_ms: bs_setup_ms.round(2) }
end

header = %w[features bytes(ls) bytes(bs) load+1st_us(ls) fresh_process_us(ls) store_load+get_us(bs) hit_ns miss_ns rss_kb setup_ms(ls) setup_ms(bs)]
puts header.join("  ")
rows.each do |r|
  puts [r[:features], r[:loadscan_bytes], r[:bootsnap_bytes], r[:loadscan_load_first_lookup_us],
        r[:loadscan_load_first_lookup_fresh_us], r[:bootsnap_store_load_first_get_us],
        r[:loadscan_lookup_hit_ns], r[:loadscan_lookup_miss_ns], r[:loadscan_rss_kb], r[:loadscan_setup_ms], r[:bootsnap_setup_ms]].join("  ")
end
Runner.write_json("cache", { reps: opts[:reps], rows: rows })
