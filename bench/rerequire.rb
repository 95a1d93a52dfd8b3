# frozen_string_literal: true
# µs per re-require of an already-loaded feature, by load-path size: stock Ruby, Bootsnap 1.13
# (its load-path cache only, bench/preludes/bootsnap.rb) and loadscan, in the same run:
#
#   ruby bench/rerequire.rb [--entries 100,1000,5000] [--runs 7] [--calls 5000] [--modes bundler,rubygems]
#
# Each size is a tree of N entries (`e0` … `eN-1`, one file each), put in front of `$LOAD_PATH`
# before the prelude; the feature (`rr_target`) is in the last of them. One fresh process per
# mode, variant, size and round (rounds alternate the variants, after an untimed round that
# fills the caches): it loads the prelude, requires the feature once, requires it again `calls`
# times untimed, then times 5 batches of `calls` plain `require "rr_target"` and reports the
# fastest batch. The table shows the median over rounds, with the lowest and highest.
#
# Modes: `bundler` starts with `require "bundler/setup"` (a Gemfile with only bootsnap), as a
# Rails `config/boot.rb` does: on RubyGems < 3.5 (Ruby 3.1) Bundler rebinds `Kernel#require` to
# Ruby's C require, so stock and loadscan are called directly. `rubygems`: no Bundler, so
# `Kernel#require` is RubyGems' Ruby method, which calls the C require (stock's, or loadscan's
# in its place) below it. Bootsnap decorates `Kernel#require` above either, and answers a
# re-require before RubyGems' method runs.
require "optparse"
require "fileutils"
require "tmpdir"
require_relative "support/runner"

opts = { entries: [100, 1000, 5000], runs: 7, calls: 5000, modes: %w[bundler rubygems] }
OptionParser.new do |o|
  o.on("--entries LIST", Array) { |l| opts[:entries] = l.map { |n| Integer(n) } }
  o.on("--runs N", Integer) { |n| opts[:runs] = n }
  o.on("--calls N", Integer) { |n| opts[:calls] = n }
  o.on("--modes LIST", Array) { |l| opts[:modes] = l }
end.parse!

TREES = File.join(Bench::OUT_DIR, "rerequire")
PRELUDES = File.expand_path("preludes", __dir__)

# The tree of `n` entries; its entry list, one a line.
def tree(n)
  dir = File.join(TREES, n.to_s)
  list = File.join(dir, "entries.txt")
  return list if File.exist?(list)

  entries = Array.new(n) { |i| File.join(dir, "e#{i}") }
  entries.each_with_index do |e, i|
    FileUtils.mkdir_p(e)
    File.write(File.join(e, "f#{i}.rb"), "")
  end
  File.write(File.join(entries.last, "rr_target.rb"), "$rr_loads = ($rr_loads || 0) + 1\n")
  File.write(File.join(dir, "Gemfile"), "source \"https://rubygems.org\"\ngem \"bootsnap\", require: false\n")
  env = { "BUNDLE_GEMFILE" => File.join(dir, "Gemfile") }
  system(env, "bundle", "lock", "--local", chdir: dir, out: File::NULL) or raise "bundle lock failed in #{dir}"
  File.write(list, entries.join("\n"))
  list
end

# The timed program: prints µs per re-require (fastest of 5 batches).
CHILD = <<~'RUBY'
  require "bundler/setup" if ENV["BUNDLE_GEMFILE"]
  $LOAD_PATH.unshift(*File.read(ENV.fetch("RR_ENTRIES")).split("\n"))
  prelude = ENV.fetch("RR_PRELUDE")
  load prelude unless prelude.empty?
  calls = Integer(ENV.fetch("RR_CALLS"))
  require "rr_target" or abort "rr_target: not loaded"
  calls.times { require "rr_target" and abort "rr_target: loaded again" }
  best = Array.new(5) do
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    i = 0
    while i < calls
      require "rr_target"
      i += 1
    end
    (Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0).fdiv(calls * 1000)
  end.min
  abort "rr_target: loaded #{$rr_loads} times" unless $rr_loads == 1
  puts best
RUBY

def variants(n, cache, mode)
  list = tree(n)
  base = { "RR_ENTRIES" => list, "RR_CALLS" => nil,
           "BUNDLE_GEMFILE" => (File.join(File.dirname(list), "Gemfile") if mode == "bundler") }
  {
    "stock" => base.merge("RR_PRELUDE" => ""),
    "bootsnap" => base.merge("RR_PRELUDE" => File.join(PRELUDES, "bootsnap.rb"),
                             "BENCH_BOOTSNAP_DIR" => File.join(cache, "bootsnap")),
    "loadscan" => base.merge("RR_PRELUDE" => File.join(PRELUDES, "loadscan.rb"),
                             "LOADSCAN_CACHE_DIR" => File.join(cache, "loadscan")),
  }
end

def run_child(env)
  out = IO.popen(env, [Bench::RUBY, "-e", CHILD], &:read)
  raise "rerequire child failed (#{env["RR_PRELUDE"]})" unless $?.success?

  Float(out)
end

results = Hash.new { |h, k| h[k] = {} }
Dir.mktmpdir("rerequire-cache") do |cache|
  opts[:modes].product(opts[:entries]).each do |mode, n|
    vs = variants(n, File.join(cache, mode, n.to_s), mode).transform_values { |env| env.merge("RR_CALLS" => opts[:calls].to_s) }
    samples = vs.keys.to_h { |k| [k, []] }
    (opts[:runs] + 1).times do |r|
      vs.to_a.rotate(r % vs.size).each do |name, env|
        us = run_child(env)
        samples[name] << us if r.positive? # round 0 fills the caches
      end
    end
    results[mode][n] = samples
    warn "rerequire: #{mode}, #{n} entries done"
  end
end

med = ->(xs) { Bench::Stats.median(xs) }
fmt = ->(xs) { format("%.2f [%.2f–%.2f]", med.(xs), xs.min, xs.max) }
rows = results.flat_map do |mode, by_n|
  first = by_n.keys.min
  by_n.map do |n, s|
    [mode, n.to_s, fmt.(s["stock"]), fmt.(s["bootsnap"]), fmt.(s["loadscan"]),
     format("%.2f", med.(s["loadscan"]) / med.(s["bootsnap"])),
     format("%.2f", med.(s["loadscan"]) / med.(by_n[first]["loadscan"]))]
  end
end
puts "µs per re-require (median of #{opts[:runs]} rounds [lowest–highest]; each round: fastest of 5 batches of #{opts[:calls]})"
puts Bench::Runner.table(["mode", "entries", "stock", "bootsnap", "loadscan", "loadscan/bootsnap", "loadscan/at #{opts[:entries].min}"], rows)
puts "written: #{Bench::Runner.write_json("rerequire", opts: opts, samples: results)}"
