# frozen_string_literal: true
# µs per `require` when `$LOAD_PATH` holds an entry Ruby expands again before every search (a
# relative String, a Pathname), against stock Ruby, in separate processes:
#
#   ruby bench/dynamic.rb [--entries 250,1000,2000] [--rounds 3] [--requires 1000] [--changes 50]
#
# Each process puts N entry dirs in front of `$LOAD_PATH` (each with one file), plus the
# variant's extra entry, requires `f0` once, then times (1) re-requires of that loaded feature
# (what Ruby's own `require` answers `false` to after its expanded load path check) and (2)
# `$LOAD_PATH` changes: push one more entry, then require a new feature. Variants: all-absolute
# entries (the common case), one relative entry, one Pathname entry, and a Pathname entry with
# every entry reached through a relative (`../`) symlink. A cost that does not grow from round
# to round, nor faster than the load path, is bounded; the table shows the median round.
require "optparse"
require "tmpdir"
require "fileutils"
require "open3"
require_relative "support/runner"

opts = { entries: [250, 1000, 2000], rounds: 3, requires: 1000, changes: 50 }
OptionParser.new do |o|
  o.on("--entries LIST", Array) { |v| opts[:entries] = v.map(&:to_i) }
  o.on("--rounds N", Integer) { |n| opts[:rounds] = n }
  o.on("--requires N", Integer, "re-requires per round") { |n| opts[:requires] = n }
  o.on("--changes N", Integer, "$LOAD_PATH changes per round") { |n| opts[:changes] = n }
end.parse!

VARIANTS = {
  "absolute" => "",
  "relative" => "$LOAD_PATH << 'rel'",
  "pathname" => "require 'pathname'; $LOAD_PATH << Pathname(File.join(ROOT, 'p'))",
  "pathname+../link" => "require 'pathname'; $LOAD_PATH << Pathname(File.join(ROOT, 'p'))",
}.freeze

# One process: prints the µs per re-require and per change of each round, as JSON.
CHILD = <<~'RUBY'
  ROOT, N, VIA_LINK, REQUIRES, CHANGES, ROUNDS = ARGV[0], ARGV[1].to_i, ARGV[2] == "1", *ARGV[3..].map(&:to_i)
  base = VIA_LINK ? File.join(ROOT, "app/vendor") : File.join(ROOT, "shared")
  $LOAD_PATH.unshift(*Array.new(N) { |i| File.join(base, "e#{i}") })
  eval(ENV.fetch("BENCH_EXTRA"))
  Dir.chdir(ROOT)
  require "f0"
  clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
  out = Array.new(ROUNDS) do |r|
    t = clock.call
    REQUIRES.times { require "f0" }
    again = (clock.call - t) / REQUIRES
    t = clock.call
    CHANGES.times { |i| $LOAD_PATH << File.join(base, "x#{r}_#{i}"); require "f#{1 + (r * CHANGES) + i}" }
    [again * 1e6, (clock.call - t) / CHANGES * 1e6]
  end
  require "json"
  puts JSON.generate(out)
RUBY

def tree(root, n, files)
  FileUtils.mkdir_p(["#{root}/p", "#{root}/rel", "#{root}/app"])
  File.symlink("../shared", "#{root}/app/vendor")
  n.times { |i| FileUtils.mkdir_p("#{root}/shared/e#{i}") }
  files.times { |i| File.write("#{root}/shared/e#{i % n}/f#{i}.rb", "") }
end

setup = File.join(Bench::ROOT, "lib/loadscan/setup.rb")
rows = []
Dir.mktmpdir("loadscan-bench-dynamic") do |tmp|
  opts[:entries].each do |n|
    root = File.join(File.realpath(tmp), "n#{n}")
    tree(root, n, 1 + (opts[:rounds] * opts[:changes]))
    VARIANTS.each do |name, extra|
      figures = [false, true].to_h do |with|
        argv = [Bench::RUBY, *(with ? ["-r", setup] : []), "-e", CHILD, root, n.to_s, name.end_with?("link") ? "1" : "0",
                opts[:requires].to_s, opts[:changes].to_s, opts[:rounds].to_s]
        env = { "BENCH_EXTRA" => extra, "LOADSCAN_CACHE" => "0", "RUBYOPT" => nil }
        out, err, status = Open3.capture3(env, *argv)
        raise "failed: #{err}" unless status.success?

        [with, JSON.parse(out)]
      end
      med = ->(list, k) { Bench::Stats.median(list.map { |r| r[k] }) }
      grow = ->(list, k) { list.last[k] / list.first[k] }
      stock, ours = figures[false], figures[true]
      rows << [n, name, format("%.1f", med.(stock, 0)), format("%.1f", med.(ours, 0)), format("%.2f", grow.(ours, 0)),
               format("%.0f", med.(stock, 1)), format("%.0f", med.(ours, 1)), format("%.2f", grow.(ours, 1))]
    end
  end
end
text = "µs per require, median of #{opts[:rounds]} rounds (#{opts[:requires]} re-requires and #{opts[:changes]} " \
       "$LOAD_PATH changes each); growth = last round / first\n" +
       Bench::Runner.table(%w[entries variant re-require_stock re-require_loadscan growth change_stock change_loadscan growth],
                           rows)
puts text
puts "\nJSON: #{Bench::Runner.write_json("dynamic", { rows: rows, table: text })}"
