#!/usr/bin/env ruby
# frozen_string_literal: true
# Cache benchmark: file size, load + first lookup, lookup ns and RSS added, for indexes of
# 5k, 50k and 200k features, against Bootsnap's load-path store on the same tree.
#
#   ruby bench/cache.rb [--sizes 5000,50000,200000] [--reps 7]
#
# Run with Ruby 3.3.8 (PATH=/opt/rubies/ruby-3.3.8/bin:$PATH), it measures against Bootsnap 1.26.1
# (Debian sid's, from that Ruby's Rails stack: bin/setup-rails-gems); with Debian's Ruby 3.1,
# against Debian's ruby-bootsnap 1.13 (the older stack); Ruby 3.4's stack has no Bootsnap. The
# output's first line names the Ruby and Bootsnap.
#
# Each size is a tree of 250 gem-like lib dirs (tmp/bench/cache-trees/N, made once), on GEM_PATH
# (stable for both) with Ruby's own gem dirs and the Rails stack's home of native gems
# (Fixtures::Bundle.ruby_gem_path). loadscan: a cold boot with LOADSCAN_LAZY=0 writes a cache of
# every feature; ext/loadscan-core/examples/cache.rs then times `store::load` +
# `Index::from_snapshot` + ranking + the first lookup REPS times in one process: its first
# repetition is a fresh process's first read (its buffer's pages faulted in for the first time,
# as on a real boot), the median of the others the in-process figure; then lookups (hit and
# miss). Bootsnap: a boot with Bootsnap (bench/preludes/bootsnap.rb) writes its store; a fresh
# Ruby process times `Store.new(path)` + the first `get` (a MessagePack load of the whole store).
# Then the whole warm setup to the first answer, revalidation included: `Loadscan.setup` + first
# `lookup`, and `Bootsnap.setup` + first `find`, each in a fresh process.
# REPS rounds, each running loadscan's example, Bootsnap's store load and the two setups once:
# figures are median [lowest–highest] over the rounds, loadscan/Bootsnap ratios per round (paired).
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "../fixtures/bundle"
require "open3"

opts = Bench::Runner.parse("usage: ruby bench/cache.rb [--sizes 5000,50000,200000] [--reps 7]",
                           { sizes: [5_000, 50_000, 200_000], reps: 7 }) do |o, op|
  o.on("--sizes LIST") { |v| op[:sizes] = v.split(",").map { |x| Integer(x.delete("_")) } }
  o.on("--reps N", Integer) { |v| op[:reps] = v }
end

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
      # A directory whose mtime is within loadscan's racy window (RACY_NS, 1.1 s) of the scan that
      # lists it counts as changed at the next boot and is not kept whole in the cache (a tree made
      # a moment ago gave 45,469 features for 50,000 files, and lookups that listed directories):
      # the cache is written once the tree is older than that, as gems installed before a boot are.
      wait = File.mtime(stamp) + 1.5 - Time.now
      sleep(wait) if wait.positive?
      per = n / ROOTS
      features = roots.each_with_index.flat_map { |_, r| [0, per / 3, per - 1].uniq.map { |i| "g#{r}/d#{i / 40}/f#{i}" } }
      [dir, roots, features]
    end

    def ruby(env, code)
      out, status = Open3.capture2(env, RUBY, "-e", code)
      raise "failed: #{code[0, 200]}" unless status.success?

      out
    end

    # "1.23 [1.01–1.50]": the median of xs and its range.
    def spread(xs, digits = 2) = format("%.#{digits}f [%.#{digits}f–%.#{digits}f]", Stats.median(xs), xs.min, xs.max)

    def ratios(a, b) = a.zip(b).map { |x, y| x / y }

    # The tree's own gems (Bootsnap's, msgpack) and this Ruby's gem set.
    def gem_path(dir) = [File.join(dir, "gems"), *::Fixtures::Bundle.ruby_gem_path].join(File::PATH_SEPARATOR)

    # Runs the benchmark for `opts` (sizes, reps) and publishes its tables.
    def run(opts)
      stack = Fixtures.stack({ "GEM_PATH" => gem_path("") })
      warn "bench/cache.rb: #{stack[:line]}"
      system("cargo", "build", "--release", "-q", "--example", "cache", "-p", "loadscan-core", chdir: ROOT, exception: true)
      rows = opts[:sizes].map { |n| measure(n, opts[:reps]) }
      text = report(rows, stack, opts[:reps])
      Runner.publish("cache", text, { stack: stack, reps: opts[:reps], rows: rows, table: text })
    end

    # One tree of `n` features, `reps` rounds: the figures of each round (`samples`), the file
    # sizes and the RSS the index adds.
    def measure(n, reps)
      lib = File.join(ROOT, "lib")
      example = File.join(ROOT, "target/release/examples/cache")
      dir, roots, features = tree(n)
      cache = File.join(dir, "loadscan-cache")
      snap = File.join(dir, "bootsnap-cache")
      FileUtils.rm_rf([cache, snap])
      gem_env = { "GEM_PATH" => gem_path(dir), "LOADSCAN_CACHE_DIR" => cache, "BENCH_BOOTSNAP_DIR" => snap, "RUBYOPT" => nil }
      lp = "$LOAD_PATH.unshift(*#{roots.inspect})"
      # Every directory listed up front (LOADSCAN_LAZY=0), so the cache holds all N features: a lazy
      # boot that looks up only 'x' would list the entries' own directories and nothing below.
      ruby(gem_env.merge("LOADSCAN_LAZY" => "0"),
           "#{lp}; require #{File.join(lib, "loadscan/setup").inspect}; Loadscan.lookup('x')")
      env_key = ruby(gem_env, "require #{File.join(lib, "loadscan").inspect}; print Loadscan::Config.new.env_key")
      roots_file = File.join(dir, "roots.txt")
      feats_file = File.join(dir, "features.txt")
      File.write(roots_file, roots.join("\n"))
      File.write(feats_file, features.join("\n"))

      # Bootsnap set up as the boot benchmarks do it (bench/preludes/bootsnap.rb, cache in BENCH_BOOTSNAP_DIR).
      boot_snap = "load #{Fixtures.prelude("bootsnap").inspect}"
      ruby(gem_env, "#{lp}; #{boot_snap}; Bootsnap::LoadPathCache.load_path_cache.find('x')")
      store = File.join(snap, "bootsnap", "load-path-cache")
      store = Dir[File.join(snap, "**", "load-path-cache")].first unless File.exist?(store)
      setup = lambda do |code|
        ruby(gem_env, "#{lp}; t = Process.clock_gettime(Process::CLOCK_MONOTONIC); #{code}; " \
                                 "print (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1e3").to_f
      end
      s = Hash.new { |h, k| h[k] = [] }
      summary = nil
      reps.times do
        out, st = Open3.capture2(example, File.join(cache, "loadscan.cache"), env_key, roots_file, feats_file, reps.to_s)
        raise "#{example} failed" unless st.success?

        lines = out.lines.map { |l| l.split.map(&:to_f) }
        summary = lines.pop # hit_ns miss_ns features bytes rss_kb
        us = lines.map { |l| (l[0] + l[1]) / 1000.0 }
        s[:fresh_us] << us.first # the first rep: a fresh process's page faults
        s[:load_us] << Stats.median(us.drop(1).empty? ? us : us.drop(1))
        s[:hit_ns] << summary[0]
        s[:miss_ns] << summary[1]
        s[:bs_load_us] << ruby(gem_env, <<~RUBY).to_f
          require "bootsnap"
          t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          store = Bootsnap::LoadPathCache::Store.new(#{store.inspect})
          store.get(#{roots.first.inspect})
          print (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1e6
        RUBY
        s[:ls_setup_ms] << setup.call("load #{File.join(lib, "loadscan/setup.rb").inspect}; Loadscan.lookup(#{features.first.inspect})")
        s[:bs_setup_ms] << setup.call("#{boot_snap}; Bootsnap::LoadPathCache.load_path_cache.find(#{features.first.inspect})")
      end
      warn "bench/cache.rb: #{n} features done"
      { features: summary[2].to_i, loadscan_bytes: summary[3].to_i, bootsnap_bytes: File.size(store), loadscan_rss_kb: summary[4].to_i,
        samples: s }
    end

    # The two tables, for `rows` (measure's).
    def report(rows, stack, reps)
      t1 = rows.map do |r|
        s = r[:samples]
        [r[:features].to_s, r[:loadscan_bytes].to_s, r[:bootsnap_bytes].to_s, format("%.2f", r[:loadscan_bytes].fdiv(r[:bootsnap_bytes])),
         spread(s[:load_us], 1), spread(s[:fresh_us], 1), spread(s[:bs_load_us], 1),
         spread(ratios(s[:fresh_us], s[:bs_load_us]), 3),
         spread(s[:hit_ns], 0), spread(s[:miss_ns], 0), r[:loadscan_rss_kb].to_s]
      end
      t2 = rows.map do |r|
        s = r[:samples]
        [r[:features].to_s, spread(s[:ls_setup_ms]), spread(s[:bs_setup_ms]),
         spread(ratios(s[:ls_setup_ms], s[:bs_setup_ms]))]
      end
      text = +"#{stack[:line]}; #{ROOTS} lib dirs per tree; median [lowest–highest] of #{reps} rounds, " \
              "ratios per round (paired)\n\n"
      text << "Cache file, load + first lookup (ls: loadscan's example, in one process and as a fresh process's first read; " \
              "bs: Bootsnap's Store.new + first get, a fresh process), lookups, RSS the index adds\n"
      text << Runner.table(%w[features bytes(ls) bytes(bs) ls/bs load+1st_us(ls) fresh_us(ls) store_load+get_us(bs) fresh(ls)/bs
                              hit_ns(ls) miss_ns(ls) rss_kb(ls)], t1)
      text << "\n\nWarm setup to the first answer (revalidation of #{ROOTS} roots included), a fresh process each\n"
      text << Runner.table(%w[features setup_ms(ls) setup_ms(bs) ls/bs], t2)
    end
  end
end

Bench::CacheBench.run(opts)
