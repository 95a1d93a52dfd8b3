# frozen_string_literal: true
# A CI job's boot of the Rails 7.2.4 app from a fresh checkout (issue 33): Bootsnap's compile cache
# keys on each file's mtime, which a fresh clone sets anew, so a cache restored from an earlier job
# misses every app file unless BOOTSNAP_REVALIDATE is set (then Bootsnap compares the file's
# contents and keeps the entry). Ruby 3.3.8 with Bootsnap 1.26.1 (bin/setup-rails-gems).
#
#   ruby bench/ci.rb [--rounds 7] [--files 300]
#
# The app (bench/support/rails_app.rb) copied to tmp/bench/fixtures/ruby-3.3/rails72-ci with FILES
# model classes added (app/models/ci_bench/: a CI app has more of its own code than `rails new`
# makes), booted as CI does: RAILS_ENV=test, CI=1 (the generated config/environments/test.rb has
# `config.eager_load = ENV["CI"].present?`: every app file loads), `bin/rails runner nil`. Boots:
# stock, full Bootsnap, loadscan + Bootsnap's compile cache (`loadscan install`'s lines), each of
# the two with BOOTSNAP_REVALIDATE=1. Each variant's caches are filled by two untimed boots (the
# CI cache, restored); before each timed boot every file of the app gets a new mtime (the fresh
# checkout: Bench::Fixtures.touch_tree); gems keep theirs (restored from CI's cache as they were).
# ROUNDS alternating rounds of CPU time (user + system of the child): median, range, and per-round
# ratios against stock and against the same boot without BOOTSNAP_REVALIDATE (geometric mean of
# the paired rounds [99% CI]). Then one boot of each with Bootsnap's instrumentation on, counting
# the events of its caches (hit, miss, stale: the file changed, revalidated: its mtime only) for
# that fresh checkout.
require "optparse"
require "fileutils"
require_relative "support/rails_app"

opts = { rounds: 7, files: 300 }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/ci.rb [--rounds N] [--files N]"
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
  o.on("--files N", Integer, "model files added to the app (default 300)") { |v| opts[:files] = v }
end.parse!
App = Bench::RailsApp
reason = App.missing and abort("bench/ci.rb: #{reason}")
abort "bench/ci.rb: this Ruby's Rails stack has no Bootsnap (run it with Ruby 3.3.8)" unless App.bootsnap?

src = App.ensure
app = File.join(Bench::Fixtures::DIR, "rails72-ci")
caches = File.join(Bench::Fixtures::DIR, "rails72-ci-caches")
FileUtils.rm_rf([app, caches])
FileUtils.cp_r(src, app)
%w[log tmp].each { |d| FileUtils.rm_rf(Dir[File.join(app, d, "*")]) }
test_rb = File.read(File.join(app, "config", "environments", "test.rb"))
abort "bench/ci.rb: the app's test.rb does not eager-load on CI" unless test_rb.include?('config.eager_load = ENV["CI"].present?')

# FILES classes of 40 short methods each, as app code tends to be (some 120 lines a file).
models = File.join(app, "app", "models", "ci_bench")
FileUtils.mkdir_p(models)
opts[:files].times do |i|
  methods = (0...40).map do |m|
    "    def step_#{m}(input, scale: #{m + 1})\n      value = input.to_i * scale + #{i}\n      value.even? ? value / 2 : value\n    end\n"
  end
  File.write(File.join(models, format("model_%03d.rb", i)),
             "module CiBench\n  class Model#{format("%03d", i)}\n    NAME = #{"model_#{i}".inspect}\n\n#{methods.join("\n")}  end\nend\n")
end

# Bootsnap's answers for one boot: its instrumentation, set before `require "bootsnap/setup"`
# (config/boot.rb loads BOOT_PRELUDE right after Bundler), written at exit.
COUNT = File.join(Bench::OUT_DIR, "ci-count.rb")
File.write(COUNT, <<~RUBY)
  require "bootsnap"
  counts = Hash.new(0)
  Bootsnap.instrumentation = ->(event, _path) { counts[event] += 1 }
  at_exit { File.binwrite(ENV.fetch("BENCH_CI_COUNTS"), Marshal.dump(counts)) }
RUBY

boots = App.variants(rails_env: "test", only: %w[stock bootsnap loadscan+compile_cache loadscan_first], app: app, caches: caches)
variants = boots.flat_map do |v|
  v.env = v.env.merge("CI" => "1")
  next [v] if v.name == "stock" || v.name == "loadscan_first" # no setting: its compile cache is keyed by contents

  revalidate = Bench::Variant.new(name: "#{v.name},revalidate", argv: v.argv, chdir: v.chdir,
                                  env: v.env.merge("BOOTSNAP_REVALIDATE" => "1",
                                                   "BOOTSNAP_CACHE_DIR" => "#{v.env["BOOTSNAP_CACHE_DIR"]}-revalidate",
                                                   "LOADSCAN_CACHE_DIR" => "#{v.env["BOOTSNAP_CACHE_DIR"]}-revalidate/loadscan"))
  [v, revalidate]
end
variants.each { |v| FileUtils.mkdir_p(v.env["BOOTSNAP_CACHE_DIR"], mode: 0o700) }
App.warm(variants) # the cache CI restores, filled by earlier jobs (same checkout path)
fresh_checkout = -> { Bench::Fixtures.touch_tree(app, ago: 30) }
variants.each { |v| v.prepare = fresh_checkout }
lock = File.read(File.join(app, "Gemfile.lock"))
versions = %w[railties bootsnap zeitwerk].map { |g| "#{g} #{lock[/^    #{g} \(([^)]+)\)/, 1]}" }.join(", ")
rb_files = Dir.glob("{app,config,lib}/**/*.rb", base: app).size
puts "Rails app #{app} (#{versions}; #{rb_files} Ruby files of its own), #{RUBY_DESCRIPTION}; " \
     "load average #{File.read("/proc/loadavg").split.first(3).join(" ")}"

cpu = Bench::Runner.alternate(variants, runs: opts[:rounds], warmup: 0, clock: :cpu)

counts = variants.reject { |v| v.name == "stock" }.to_h do |v|
  out = File.join(Bench::OUT_DIR, "ci-counts-#{v.name}.marshal")
  fresh_checkout.call
  Bench::Runner.time_once(v.env.merge("BOOT_PRELUDE" => COUNT, "BENCH_CI_COUNTS" => out), v.argv, chdir: v.chdir)
  [v.name, Marshal.load(File.binread(out))] # rubocop:disable Security/MarshalLoad
end

stats = Bench::Stats
ratio = lambda do |a, b|
  r = stats.paired_ratio(a, b)
  a.equal?(b) ? "1" : format("%.2f [%.2f–%.2f]", r[:ratio], r[:lo], r[:hi])
end
rows = variants.map do |v|
  t = cpu[v.name]
  base = v.name.end_with?(",revalidate") ? cpu[v.name.delete_suffix(",revalidate")] : nil
  c = counts[v.name]
  [v.name, format("%.0f", stats.median(t) * 1000), format("%.0f–%.0f", t.min * 1000, t.max * 1000), ratio.(t, cpu["stock"]),
   base ? ratio.(t, base) : "-", ratio.(t, cpu["bootsnap,revalidate"]), c ? (c.empty? ? "none" : c.sort.map { |k, n| "#{k} #{n}" }.join(", ")) : "-"]
end
puts "\nA fresh checkout's boot on CI (RAILS_ENV=test, CI=1: eager loading), caches restored; #{opts[:rounds]} alternating " \
     "rounds:\nCPU ms median and range; ratios: geometric mean of the paired rounds [99% CI]; Bootsnap's instrumentation " \
     "(one boot): the events it reported.\n\n"
text = Bench::Runner.table(%w[boot cpu_ms range_ms cpu/stock cpu/without_revalidate cpu/bootsnap_revalidate bootsnap_events], rows)
puts text
json = Bench::Runner.write_json("ci", { versions: versions, rounds: opts[:rounds], files: opts[:files], table: text,
                                        cpu_ms: cpu.transform_values { |t| t.map { |x| (x * 1000).round(1) } },
                                        bootsnap_events: counts })
puts "\nJSON: #{json}"
