# frozen_string_literal: true
# Instructions executed per boot variant (warm caches), under valgrind's callgrind:
#
#   ruby bench/instructions.rb [--gems 200 | --plain 200 | --debian] [--jobs 2] [--only loadscan,bootsnap,…]
#
# Wall time on a shared 2-core VM swings by ±30% between runs, so a difference of a few ms (the
# warm overhead of loadscan above the floor) needs dozens of rounds to show. The user-space
# instruction count of one boot is deterministic to a fraction of a percent, so it gives the
# overhead ratio (variant − floor)/(bootsnap − floor) without that noise. What it does not see:
# time in the kernel (syscalls, page faults) and cache misses — wall time (bench/boot.rb) stays
# the measure of record, and this is its noise-free cross-check.
require "optparse"
require "etc"
require_relative "support/instructions"

opts = Bench::Runner.parse("usage: ruby bench/instructions.rb [--gems N | --plain N | --debian] [--jobs N]",
                           { fixture: "gems-200", jobs: [Etc.nprocessors, 4].min }) do |o, opts|
  o.on("--gems N", Integer) { |n| opts[:fixture] = "gems-#{n}" }
  o.on("--plain N", Integer, "the app with gem dirs put on $LOAD_PATH by hand, no Bundler") { |n| opts[:fixture] = "plain-#{n}" }
  o.on("--debian") { opts[:fixture] = "debian" }
  o.on("--jobs N", Integer) { |n| opts[:jobs] = n }
  o.on("--only LIST", Array, "variants (stock takes longest under valgrind: minutes from 400 gems)") { |v| opts[:only] = v }
end
abort "bench: valgrind not found (apt-get install valgrind)" unless system("valgrind --version >/dev/null 2>&1")
counts = Bench::Instructions.run(opts[:fixture], jobs: opts[:jobs], only: opts[:only])
text = Bench::Instructions.report(opts[:fixture], counts)
Bench::Runner.publish("instructions-#{opts[:fixture]}", text, { counts: counts, table: text })
