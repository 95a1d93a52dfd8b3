# frozen_string_literal: true
# A real Rails 7.2.4 app's warm boot, several ways (bench/support/rails_app.rb): stock, Bootsnap as
# `rails new` wires it (load-path cache and compile cache), loadscan + Bootsnap's compile cache
# (what `loadscan install` made of it before the first line: GC deferred during the boot,
# loadscan's default), the same with LOADSCAN_GC=off, loadscan alone, loadscan on config/boot.rb's
# first line (with Bootsnap's YAML cache, or alone) and loadscan's load-path half alone (after
# Bundler, compile cache off); --only picks some. `bin/rails runner nil` in each environment asked
# for (production eager-loads the app and the frameworks).
#
#   ruby bench/rails.rb [--rounds 10] [--envs development,production] [--no-instructions] [--jobs 2] [--only a,b]
#
# Needs Ruby 3.2+ with Debian sid's Rails stack (bin/setup-rails-gems): on Ruby 3.3.8 against
# Bootsnap 1.26.1 (sid's); Ruby 3.4's and 4.0's stacks have no Bootsnap, so there only the boots
# without it run, and the ratios are against stock. Per environment: every cache warmed
# (two untimed boots each); one boot of each with GC::Profiler on, for the cause of every major
# GC and the features loaded (against stock's, Bootsnap's, msgpack's and loadscan's own files
# left out); ROUNDS alternating rounds of CPU time (user + system of the child), median, and
# per-round ratios against stock and Bootsnap with their 99% CI (bench/support/stats.rb) and
# range; then one boot of each under callgrind (user-space instructions: deterministic) with the
# GC counts of that very boot, against stock's and Bootsnap's. With both load_path_half and
# loadscan_first_alone in the run, one line per environment compares them (instructions, and
# CPU paired by round).
require "optparse"
require_relative "support/rails_app"

opts = { rounds: 10, envs: %w[development], instructions: true, jobs: 2, regen: false }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/rails.rb [--rounds N] [--envs development,production] [--no-instructions] [--jobs N]"
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
  o.on("--envs LIST", Array) { |v| opts[:envs] = v }
  o.on("--[no-]instructions", "count instructions under callgrind (about a minute per boot)") { |v| opts[:instructions] = v }
  o.on("--jobs N", Integer, "callgrind runs at a time") { |v| opts[:jobs] = v }
  o.on("--regen", "generate the app again") { opts[:regen] = true }
  o.on("--only LIST", Array, "these boots only (stock and Bootsnap always)") { |v| opts[:only] = v | %w[stock bootsnap] }
end.parse!
reason = Bench::RailsApp.missing and abort("bench/rails.rb: #{reason}")
abort "bench/rails.rb: valgrind not found (bin/setup installs it)" if opts[:instructions] && !system("valgrind --version >/dev/null 2>&1")

App = Bench::RailsApp
Stats = Bench::Stats
app = App.ensure(regen: opts[:regen])
lock = File.read(File.join(app, "Gemfile.lock"))
versions = %w[railties bootsnap zeitwerk].map { |g| "#{g} #{lock[/^    #{g} \(([^)]+)\)/, 1] || "none"}" }.join(", ")
puts "Rails app #{app} (#{versions}), #{RUBY_DESCRIPTION}; load average #{File.read("/proc/loadavg").split.first(3).join(" ")}"

results = opts[:envs].to_h do |rails_env|
  vs = App.variants(rails_env: rails_env, only: opts[:only])
  App.warm(vs)
  profiled = vs.to_h { |v| [v.name, App.report(v, "#{rails_env}-profiled", profile: true)] }
  cpu = Bench::Runner.alternate(vs, runs: opts[:rounds], warmup: 0, clock: :cpu)
  counted = opts[:instructions] ? App.instructions(vs, rails_env, jobs: opts[:jobs]) : {}
  [rails_env, { profiled: profiled, cpu: cpu, counted: counted }]
end

# One round has no interval: its ratio alone.
fmt_ratio = lambda do |a, b|
  next "1" if a.equal?(b)

  r = Stats.paired_ratio(a, b)
  r ? format("%.2f [%.2f–%.2f]", r[:ratio], r[:lo], r[:hi]) : format("%.2f", a[0] / b[0])
end
rows = results.flat_map do |rails_env, r|
  r[:cpu].map do |name, t|
    c = r[:counted][name]
    n = c && c[:instructions]
    ref = r[:counted]["bootsnap"]
    base = r[:counted]["stock"]
    diff = App.features_vs_stock(r[:profiled][name], r[:profiled]["stock"])
    same = diff.values.all?(&:empty?) ? "same" : "+#{diff[:extra].size} −#{diff[:missing].size}"
    [rails_env, App::LABELS.fetch(name), format("%.0f", Stats.median(t) * 1000),
     format("%.0f–%.0f", t.min * 1000, t.max * 1000), fmt_ratio.(t, r[:cpu]["stock"]), (r[:cpu]["bootsnap"] ? fmt_ratio.(t, r[:cpu]["bootsnap"]) : "-"),
     n ? format("%.1f", n / 1e6) : "-", n && base ? format("%.3f", n.fdiv(base[:instructions])) : "-",
     n && ref ? format("%.3f", n.fdiv(ref[:instructions])) : "-",
     App.gc_summary(c ? c[:report] : r[:profiled][name], r[:profiled][name]),
     (c ? c[:report] : r[:profiled][name])[:gc][:old_objects].to_s, same]
  end
end
header = %w[env boot cpu_ms range_ms cpu/stock cpu/bootsnap instructions_M instr/stock instr/bootsnap gc_runs old_objects features]
puts "\nWarm boots of `bin/rails runner nil`, #{opts[:rounds]} alternating rounds: CPU ms median and range; ratios:"
puts "geometric mean of the paired rounds [99% CI]. GC runs and old objects at exit of the boot counted under callgrind;"
puts "causes of the major runs from a profiled boot. features: against stock's (own files left out).\n\n"
text = Bench::Runner.table(header, rows)
results.each do |rails_env, r|
  first, half = r[:cpu].values_at("loadscan_first_alone", "load_path_half")
  next unless first && half

  counts = r[:counted].values_at("loadscan_first_alone", "load_path_half").map { |c| c && c[:instructions] }
  instr = counts.all? ? format("instructions %.3f, ", counts[0].fdiv(counts[1])) : ""
  text += "\n#{rails_env}: first line alone / load-path half: #{instr}CPU #{fmt_ratio.(first, half)}"
end
results.each do |rails_env, r|
  next if r[:counted].empty?

  off = App.gc_check(r[:counted], r[:profiled])
  text += "\n#{rails_env}: GC deferral's [end, budget runs] under callgrind #{off ? "differ from the plain boots': #{off}" : "as in the plain boots"}"
end
text += "\nload average at the end #{File.read("/proc/loadavg").split.first(3).join(" ")}"
puts text
results.each do |rails_env, r|
  r[:profiled].each do |name, rep|
    d = App.features_vs_stock(rep, r[:profiled]["stock"])
    next if d.values.all?(&:empty?)

    puts "#{rails_env} #{name}: loads #{d[:extra].first(3).join(", ")}#{"…" if d[:extra].size > 3} that stock does not; " \
         "not #{d[:missing].first(3).join(", ")}#{"…" if d[:missing].size > 3}"
  end
end
json = Bench::Runner.write_json("rails", {
  versions: versions, rounds: opts[:rounds], table: text,
  results: results.transform_values do |r|
    { cpu_ms: r[:cpu].transform_values { |t| t.map { |x| (x * 1000).round(1) } },
      instructions: r[:counted].transform_values { |c| c[:instructions] },
      gc: r[:counted].transform_values { |c| c[:report][:gc] },
      gc_runs: r[:profiled].transform_values { |p| p[:gc_runs] }, hits: r[:profiled].transform_values { |p| p[:hits] } }
  end,
})
puts "\nJSON: #{json}"
