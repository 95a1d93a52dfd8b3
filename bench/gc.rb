# frozen_string_literal: true
# GC during the boot (issues 26, 34): the Rails app (Fixtures::RailsApp, `bin/rails runner nil`,
# loadscan + Bootsnap's compile cache where the Ruby's stack has Bootsnap, as `loadscan install`
# sets it up) and the many-gem fixture (gems-N, through real Bundler, which says
# `Loadscan.booted!`), each booted with loadscan's default (`on`: LOADSCAN_GC=auto, which defers
# GC on Ruby 3.4+ where the boot has a known end), with LOADSCAN_GC=off, and each of those with
# the RUBY_GC_* settings `loadscan doctor` names for it.
# Warm caches; ROUNDS rounds, each boots every variant once (order rotated per round); CPU time
# (user + system) and peak RSS per boot, medians and per-round ratios against `off` (median
# [min–max]); GC runs (deterministic for a tree: one boot's) before loadscan's setup, from setup
# to the end of the boot, and from setup to exit.
#
#   ruby bench/gc.rb [--rounds 7] [--targets rails,gems-500]
#
# Results: tmp/bench/gc.json. Needs GNU time (/usr/bin/time) for the peak RSS.
require "optparse"
require_relative "support/gc_boots"

rounds = 7
targets = %w[rails gems-500]
OptionParser.new do |o|
  o.on("--rounds N", Integer) { |n| rounds = n }
  o.on("--targets LIST", Array) { |t| targets = t }
end.parse!

median = ->(xs) { Bench::Stats.median(xs) }
spread = ->(xs) { format("%.2f [%.2f–%.2f]", median.(xs), xs.min, xs.max) }
results = {}
targets.each do |name|
  target = name == "rails" ? Bench::GCBoots.rails : Bench::GCBoots.fixture(name)
  next unless target

  caches = File.join(Bench::OUT_DIR, "gc", Bench::Fixtures::RUBY_TAG, name)
  FileUtils.rm_rf(caches)
  variants = Bench::GCBoots.variants(target, caches)
  boots = variants.keys.to_h { |v| [v, []] }
  rounds.times do |r|
    variants.keys.rotate(r % variants.size).each { |v| boots[v] << Bench::GCBoots.measure(target, variants[v]) }
    warn "bench: #{name}: round #{r + 1}/#{rounds}"
  end

  puts "#{name} (Ruby #{RUBY_VERSION}, #{rounds} rounds)"
  puts format("%-14s %8s %-20s %8s %-20s  %-38s %s", "boot", "CPU s", "CPU / off", "RSS MB", "RSS / off",
              "GC runs: before setup + boot (to exit)", "GC ms: before setup + boot")
  base = boots.fetch("off")
  boots.each do |v, list|
    cpu = list.each_index.map { |i| list[i][:cpu] / base[i][:cpu] }
    rss = list.each_index.map { |i| list[i][:rss_mb] / base[i][:rss_mb] }
    runs = Bench::GCBoots.runs(list.last[:gc])
    ms = Bench::GCBoots.gc_ms(list)
    puts format("%-14s %8.3f %-20s %8.1f %-20s  %-38s %d + %d", v, median.(list.map { _1[:cpu] }), spread.(cpu),
                median.(list.map { _1[:rss_mb] }), spread.(rss), format("%d + %d (%d)", runs[:before_setup], runs[:boot], runs[:process]),
                median.(ms.map(&:first)), median.(ms.map(&:last)))
  end
  # What no GC at all would save: the CPU of `off` less all its boot's GC time, of its CPU.
  floor = base.map { |b| (b[:cpu] - (b[:gc]["time_ms"] / 1000.0)) / b[:cpu] }
  puts format("a boot with no GC run before its end at all would take %s of off's CPU (GC time is Ruby's GC.stat(:time))", spread.(floor))
  results[name] = { env: variants, boots: boots }
end

out = File.join(Bench::OUT_DIR, "gc.json")
File.write(out, JSON.pretty_generate(ruby: RUBY_DESCRIPTION, rounds: rounds, results: results))
puts "wrote #{out}"
