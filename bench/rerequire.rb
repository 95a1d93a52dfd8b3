# frozen_string_literal: true
# µs per re-require of an already-loaded feature, by load-path size: stock Ruby, Bootsnap (its
# load-path cache only, bench/preludes/bootsnap.rb) and loadscan, in the same run:
#
#   ruby bench/rerequire.rb [--entries 100,1000,5000] [--runs 7] [--calls 5000] [--modes bundler,rubygems]
#
# Run with Ruby 3.3.8 (PATH=/opt/rubies/ruby-3.3.8/bin:$PATH), it measures against Bootsnap 1.26.1
# (Debian sid's, from that Ruby's Rails stack: bin/setup-rails-gems); with Debian's Ruby 3.1,
# against Debian's ruby-bootsnap 1.13 (the older stack); Ruby 3.4's stack has no Bootsnap. The
# output's first line names the Ruby and Bootsnap.
#
# Each size is a tree of N entries (`e0` … `eN-1`, one file each; per Ruby, under
# tmp/bench/fixtures/ruby-X.Y/rerequire/N), put in front of `$LOAD_PATH` before the prelude; the
# feature (`rr_target`) is in the last of them. One fresh process per mode, variant, size and
# round (rounds alternate the variants, after an untimed round that fills the caches): it loads
# the prelude, requires the feature once, requires it again `calls` times untimed, then times 5
# batches of `calls` plain `require "rr_target"` and reports the fastest batch. The table shows
# the median over rounds, with the lowest and highest, and loadscan's ratios to stock and to
# Bootsnap in each round (the same round: paired), median [lowest–highest].
#
# Every process runs with GEM_PATH = Ruby's own gem dirs and, where bin/setup made it, the Rails
# stack's home of native gems (Fixtures::Bundle.ruby_gem_path, as the bench's Bundler fixtures).
# Modes: `bundler` starts with `require "bundler/setup"` (a Gemfile with only bootsnap, locked
# offline), as a Rails `config/boot.rb` does. On RubyGems < 3.5 (Ruby 3.1) Bundler rebinds
# `Kernel#require` to Ruby's C require, so stock and loadscan are called directly; on Ruby 3.4
# `Kernel#require` is the bundled-gems warning's wrapper, in front of RubyGems' method, both Ruby
# code that runs before the C require loadscan takes the place of. `rubygems`: no Bundler, so
# `Kernel#require` is RubyGems' Ruby method, which calls the C require (stock's, or loadscan's in
# its place) below it. Bootsnap decorates `Kernel#require` above either, and answers a
# re-require before RubyGems' method runs.
require "fileutils"
require "tmpdir"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "../fixtures/bundle"

banner = "usage: ruby bench/rerequire.rb [--entries 100,1000,5000] [--runs 7] [--calls 5000] [--modes bundler,rubygems]"
opts = Bench::Runner.parse(banner, { entries: [100, 1000, 5000], runs: 7, calls: 5000, modes: %w[bundler rubygems] }) do |o, op|
  o.on("--entries LIST", Array) { |l| op[:entries] = l.map { |n| Integer(n) } }
  o.on("--runs N", Integer) { |n| op[:runs] = n }
  o.on("--calls N", Integer) { |n| op[:calls] = n }
  o.on("--modes LIST", Array) { |l| op[:modes] = l }
end

TREES = File.join(Bench::Fixtures::DIR, "rerequire")
PRELUDES = File.expand_path("preludes", __dir__)
GEM_PATH = Fixtures::Bundle.ruby_gem_path.join(File::PATH_SEPARATOR)

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
  Fixtures::Bundle.lock!({ "BUNDLE_GEMFILE" => File.join(dir, "Gemfile"), "GEM_PATH" => GEM_PATH }, dir)
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
  base = { "RR_ENTRIES" => list, "RR_CALLS" => nil, "GEM_PATH" => GEM_PATH,
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

stack = Bench::Fixtures.stack(variants(opts[:entries].min, "", "bundler")["bootsnap"])
warn "rerequire: #{stack[:line]}"
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
# loadscan's time over another variant's, round by round (the same round: paired)
paired = ->(s, other) { fmt.(s["loadscan"].zip(s[other]).map { |l, o| l / o }) }
rows = results.flat_map do |mode, by_n|
  first = by_n.keys.min
  by_n.map do |n, s|
    [mode, n.to_s, fmt.(s["stock"]), fmt.(s["bootsnap"]), fmt.(s["loadscan"]), paired.(s, "stock"), paired.(s, "bootsnap"),
     format("%.2f", med.(s["loadscan"]) / med.(by_n[first]["loadscan"]))]
  end
end
text = +"#{stack[:line]}\n"
text << "µs per re-require (median of #{opts[:runs]} rounds [lowest–highest]; each round: fastest of 5 batches of " \
        "#{opts[:calls]}); loadscan's ratios to stock and Bootsnap: per round, median [lowest–highest]\n"
text << Bench::Runner.table(["mode", "entries", "stock", "bootsnap", "loadscan", "loadscan/stock", "loadscan/bootsnap",
                             "loadscan/at #{opts[:entries].min}"], rows)
Bench::Runner.publish("rerequire", text, { stack: stack, opts: opts, samples: results, table: text })
