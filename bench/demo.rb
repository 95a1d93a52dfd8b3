# frozen_string_literal: true
# The body of bin/demo (run that: it builds first). Boots a ~300-gem fixture app through real
# Bundler (`require "bundler/setup"`, then the prelude, as config/boot.rb) with stock Ruby,
# Bootsnap's load-path cache (when installed: 1.26.1 on Ruby 3.3.8, bin/setup --demo) and loadscan
# (cold: empty cache dir; warm: cache dir left by the previous run), 5 alternating rounds, median
# per row; the table names the Ruby and the Bootsnap.
require "fileutils"
require_relative "support/runner"
require_relative "support/fixtures"

include Bench
RUNS = Integer(ENV.fetch("DEMO_RUNS", 5))
fx = Fixtures.ensure("gems-300")
gems = Dir[File.join(fx[:gems], "*")].size
files = Dir.glob("**/*.rb", base: fx[:root]).size
stack = Fixtures.stack(Fixtures.gem_env(fx))
puts "demo: Bundler app with #{gems} installed gems and #{files} Ruby files (#{fx[:root]}); #{stack[:line]}"

cache = File.join(OUT_DIR, "demo-cache")
FileUtils.rm_rf(cache)
ls_cold = File.join(cache, "loadscan-cold")
ls_warm = File.join(cache, "loadscan-warm")
bs_warm = File.join(cache, "bootsnap-warm")
[ls_warm, bs_warm].each { |d| FileUtils.mkdir_p(d) }
argv = [RUBY, fx[:boot]]
stock = "stock Ruby #{RUBY_VERSION}"
variants = [Variant.new(name: stock, env: {}, argv: argv)]
if Fixtures.bootsnap?(fx) && stack[:bootsnap]
  variants << Variant.new(name: "Bootsnap #{stack[:bootsnap]} (warm)", argv: argv, env: Fixtures.bootsnap_env(bs_warm))
end
variants << Variant.new(name: "loadscan (cold)", argv: argv,
                        env: { "BOOT_PRELUDE" => Fixtures.prelude("loadscan"), "LOADSCAN_CACHE_DIR" => ls_cold },
                        prepare: -> { FileUtils.rm_rf(ls_cold); FileUtils.mkdir_p(ls_cold) })
variants << Variant.new(name: "loadscan (warm)", argv: argv,
                        env: { "BOOT_PRELUDE" => Fixtures.prelude("loadscan"), "LOADSCAN_CACHE_DIR" => ls_warm })

variants.each { |v| v.env = Fixtures.gem_env(fx).merge(v.env) }
times = Runner.alternate(variants, runs: RUNS, warmup: 1,
                         progress: lambda { |r, n|
                           # one line redrawn on a terminal, a line per round in a log
                           $stderr.tty? ? $stderr.print("\rdemo: round #{r}/#{n}") : $stderr.puts("demo: round #{r}/#{n}")
                           $stderr.puts if r == n && $stderr.tty?
                         })
bootsnap = variants[1].name if variants[1]&.name&.start_with?("Bootsnap")
rows = variants.map do |v|
  r = Stats.paired_ratio(times[v.name], times[stock])
  [v.name, Runner.ms(Stats.median(times[v.name])),
   v.name == stock ? "1.00x" : format("%.2fx", r[:ratio]),
   v.name == stock ? "" : format("%.1fx faster", 1 / r[:ratio]),
   *(format("%.2fx", Stats.paired_ratio(times[v.name], times[bootsnap])[:ratio]) if bootsnap)]
end
puts
puts Runner.table(["boot", "median ms", "time vs stock", "", *("time vs #{bootsnap.delete_suffix(" (warm)")}" if bootsnap)], rows)
puts "(median of #{RUNS} alternating runs; ratios are geometric means of paired runs)"
puts "note: loadscan wrote no cache files, so its warm boot is a cold one (persistent cache not there yet)" if Dir.empty?(ls_warm)
puts "more: bench/README.md (ruby bench/boot.rb --quick)"
