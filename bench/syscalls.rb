# frozen_string_literal: true
# Failed file-system calls per boot, BY CAUSE, for stock Ruby, Bootsnap 1.13 (where installed)
# and loadscan, warm and cold, on the Debian-packages tree and on the real-Bundler app, in one run:
#
#   ruby bench/syscalls.rb [--fixtures debian,gems-200] [--runs 2] [--no-cold]
#
# Method (bench/support/syscalls.rb has the details): each boot runs under
# `strace -f -qq -e trace=openat,open,stat,lstat,newfstatat,statx,access,faccessat,faccessat2`,
# every call kept, so the successful opens tell what had been loaded at each point. Each failed
# call gets one cause from its path and from what was opened before it, against the boot's
# $LOAD_PATH (a stock boot's report of the same fixture, in order):
#   own          the cache's own work: its cache dir, a load-path entry or an ancestor of one
#                (entry checks), an O_DIRECTORY open under an entry (listing). Stock: none. Cold
#                "apart from the listing" = total − own.
#   miss         <entry>/F.rb|.so where no entry has F.rb or F.so at all;
#   re-require   <entry>/F.rb|.so where F's winner (first entry with F.rb, else first with F.so,
#                Ruby's precedence) had already been opened: F is loaded and probed again;
#   left_to_ruby <entry>/F.rb|.so where F's winner was not loaded yet: a search up to the winner;
#   rubygems     RubyGems'/Bundler's own probes: under a GEM_PATH dir but no feature probe
#                (specifications/, gems/*/man, extensions/), *.gemspec, .bundle, Gemfile;
#   outside      everything else: relative spellings (`enumerator.so`, checked against
#                $LOADED_FEATURES), encodings, C-level requires of absolute paths, libc lookups.
# Path-based, so it can be checked by hand in the kept logs (tmp/bench/strace/*.strace), and it
# does not depend on timing. `-k` stack traces were not needed: a probe's path names its entry
# and feature, and Ruby's precedence names the winner.
#
# The trees do not change during a run, so the counts are deterministic: every variant runs
# `--runs` times (default 2) and the output says whether the runs agreed.
# Variants: stock; bootsnap (warm: cache filled by an untraced boot; cold: empty cache dir);
# loadscan (the same). Ratios are of failed openat (and stat-family) calls.
require "optparse"
require "json"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "support/syscalls"
require_relative "boot"

opts = { fixtures: nil, runs: 2, cold: true }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/syscalls.rb [--fixtures debian,gems-200] [--gems N] [--debian] [--runs 2] [--no-cold]"
  o.on("--fixtures LIST", Array, "fixtures (default: debian when installed, gems-200)") { |v| opts[:fixtures] = v }
  o.on("--gems N", Integer, "only gems-N") { |n| opts[:fixtures] = ["gems-#{n}"] }
  o.on("--plain N", Integer, "only plain-N") { |n| opts[:fixtures] = ["plain-#{n}"] }
  o.on("--debian", "only the Debian tree") { opts[:fixtures] = ["debian"] }
  o.on("--runs N", Integer, "runs per variant, compared (default 2)") { |n| opts[:runs] = n }
  o.on("--[no-]cold", "also cold boots (default yes)") { |v| opts[:cold] = v }
end.parse!
abort "bench: strace not found (bin/setup installs it)" unless system("strace -V >/dev/null 2>&1")
opts[:fixtures] ||= (Bench::Fixtures.debian_available? ? ["debian"] : []) + ["gems-200"]

S = Bench::Syscalls
ratio = ->(a, b) { b.zero? ? (a.zero? ? "0/0" : "∞") : format("%.2g", a.fdiv(b)) }
out = +""
json = {}
opts[:fixtures].each do |name|
  fx = Bench::Fixtures.ensure(name)
  S.load_path(fx)
  runs = []
  %w[warm cold].each do |state|
    next if state == "cold" && !opts[:cold]

    vs = Bench::Boot.variants_for(fx, state).select { |v| %w[stock bootsnap loadscan].include?(v.name) }
    vs.reject! { |v| v.name == "stock" } if state == "cold" # stock has no cache: its warm row stands
    vs.each do |v|
      Bench::Runner.time_once(v.env, v.argv) if state == "warm" # fill the warm cache
      rs = Array.new(opts[:runs]) { |i| S.measure(fx, v, "#{state}-#{i}") }
      same = rs.map { |r| r[:counts] }.uniq.size == 1
      runs << { variant: v.name, state: state, result: rs.first, same: same,
                all: rs.map { |r| [r[:failed_openat], r[:failed_stat]] } }
      warn format("bench: %s %s %s: failed openat %s, stat %s", name, state, v.name,
                  rs.map { |r| r[:failed_openat] }.join("/"), rs.map { |r| r[:failed_stat] }.join("/"))
    end
  end
  rows = runs.map do |x|
    r = x[:result]
    [x[:variant], x[:state], "#{r[:before]["openat"]}/#{r[:before]["stat"]}"] + S::CAUSES.map { |c| "#{r[:counts][c]["openat"]}/#{r[:counts][c]["stat"]}" } +
      [r[:failed_openat].to_s, S.total(r, "openat", except: ["own"]).to_s, r[:failed_stat].to_s, S.total(r, "stat", except: ["own"]).to_s]
  end
  out << "#{fx[:name]}: failed calls of one boot by cause (failed openat/failed stat-family; strace -f)\n"
  out << Bench::Runner.table(%w[variant state before_prelude] + S::CAUSES + %w[openat openat−own stat stat−own], rows) << "\n"
  get = ->(v, s) { runs.find { |x| x[:variant] == v && x[:state] == s }&.dig(:result) }
  stock = get.("stock", "warm")
  %w[warm cold].each do |state|
    ls = get.("loadscan", state) or next
    bs = get.("bootsnap", state)
    %w[openat stat].each do |kind|
      l = S.total(ls, kind, except: ["own"])
      line = format("  %s loadscan, failed %s apart from own work: %d; /stock %s (target ≤ 0.001: %s)", state, kind, l,
                    ratio.(l, S.total(stock, kind)), l <= 0.001 * S.total(stock, kind) ? "met" : "NOT met")
      if bs
        b = S.total(bs, kind, except: ["own"])
        line << format("; /bootsnap %s (%d; target ≤ 1: %s)", ratio.(l, b), b, l <= b ? "met" : "NOT met")
      end
      out << line << "\n"
    end
  end
  same = runs.all? { |x| x[:same] }
  out << "  deterministic: #{same ? "yes, #{opts[:runs]} runs of each variant gave identical counts by cause" : "NO: " + runs.reject { |x| x[:same] }.map { |x| "#{x[:variant]} #{x[:state]} #{x[:all].inspect}" }.join("; ")}\n" if opts[:runs] > 1
  runs.select { |x| x[:variant] != "stock" }.each do |x|
    %w[openat stat].each do |kind|
      b = S.breakdown(x[:result], kind: kind, top: 6)
      out << "  #{x[:variant]} #{x[:state]} #{kind}: #{b.empty? ? "none" : b.join("; ")}\n"
    end
  end
  %w[openat stat].each { |kind| out << "  stock #{kind}: #{S.breakdown(stock, kind: kind, top: 3).join("; ")}\n" }
  runs.each do |x|
    b = x[:result][:before_by_cause].filter_map { |c, v| "#{c} #{v["openat"]}/#{v["stat"]}" unless (v["openat"] + v["stat"]).zero? }
    out << "  #{x[:variant]} #{x[:state]}, before the prelude (openat/stat) by cause: #{b.join(", ")}\n"
  end
  out << "\n"
  json[name] = runs.map { |x| x.merge(result: x[:result]) }
end
puts out
puts "JSON: #{Bench::Runner.write_json("syscalls", { fixtures: json, table: out, at: Time.now.utc.to_s })}"
puts "strace logs: #{File.join(Bench::OUT_DIR, "strace")}"
