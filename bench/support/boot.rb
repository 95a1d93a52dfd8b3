# frozen_string_literal: true
# Bench::Boot: the boot benchmark's variants, runs and report. bench/boot.rb runs it;
# bench/check.rb, bench/syscalls.rb and bench/profile.rb use its variants.
require "etc"
require "fileutils"
require_relative "runner"
require_relative "fixtures"

module Bench
  module Boot
    VARIANTS = %w[stock bootsnap loadscan recorded recorded_rubygems].freeze
    # The two floors, and what each overhead table calls them.
    FLOORS = %w[recorded recorded_rubygems].freeze
    STATES = %w[cold warm checkout].freeze

    module_function

    def variants_for(fx, state)
      cache = Fixtures.cache_dir(fx)
      recorded_map = Fixtures.ensure_recorded_map(fx)
      argv = [RUBY, fx[:boot]]
      bootsnap = Fixtures.bootsnap?(fx)
      extra = state == "cold" && bootsnap ? [bootsnap_warm(fx, cache, argv)] : []
      extra + VARIANTS.reject { |v| v == "bootsnap" && !bootsnap }.map do |v|
        dir = File.join(cache, "#{v}-#{state}")
        snap = File.join(cache, "#{v}-warm")
        env = {}
        prepare = nil
        case v
        when "bootsnap"
          env = Fixtures.bootsnap_env(dir)
        when "loadscan"
          env = { "BOOT_PRELUDE" => Fixtures.prelude("loadscan"), "LOADSCAN_CACHE_DIR" => dir }
          env["LOADSCAN_VALIDATE"] = "listing" if state == "checkout"
        when "recorded", "recorded_rubygems"
          env = { "BOOT_PRELUDE" => Fixtures.prelude("recorded"), "BENCH_RECORDED_MAP" => recorded_map }
          env["BENCH_RECORDED_BELOW"] = "rubygems" if v == "recorded_rubygems"
        end
        if %w[bootsnap loadscan].include?(v)
          case state
          when "cold"
            prepare = -> { FileUtils.rm_rf(dir); FileUtils.mkdir_p(dir) }
            prepare.call
          when "warm"
            FileUtils.rm_rf(dir)
            FileUtils.mkdir_p(dir) # filled by the warm-up round
          when "checkout"
            # needs the warm state's cache (run after the warm block, or filled here)
            unless File.directory?(snap) && !Dir.empty?(snap)
              FileUtils.mkdir_p(snap)
              Runner.time_once(Fixtures.gem_env(fx).merge(env).merge(v == "bootsnap" ? { "BENCH_BOOTSNAP_DIR" => snap } : { "LOADSCAN_CACHE_DIR" => snap }).reject { |k, _| k == "LOADSCAN_VALIDATE" }, argv)
            end
            prepare = lambda do
              FileUtils.rm_rf(dir)
              FileUtils.cp_r(snap, dir)
              Fixtures.touch_tree(fx[:app])
            end
          end
        end
        Variant.new(name: v, env: Fixtures.gem_env(fx).merge(env), argv: argv, prepare: prepare)
      end
    end

    # Bootsnap with a cache filled by the warm-up round and then kept: run in the cold block, so
    # that cold loadscan against warm Bootsnap is paired within the same rounds.
    def bootsnap_warm(fx, cache, argv)
      dir = File.join(cache, "bootsnap-warmref")
      FileUtils.rm_rf(dir)
      FileUtils.mkdir_p(dir)
      Variant.new(name: "bootsnap_warm", argv: argv, env: Fixtures.gem_env(fx).merge(Fixtures.bootsnap_env(dir)))
    end

    # `only`: the variants to run (nil: all); ratios against a variant left out are not shown.
    def run(fixtures:, states:, runs:, regen: false, only: nil)
      results = []
      summary = []
      fixtures.each do |name|
        fx = Fixtures.ensure(name, regen: regen)
        states.each do |state|
          t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          vs = variants_for(fx, state).select { |v| only.nil? || only.include?(v.name) }
          times = Runner.alternate(vs, runs: runs, warmup: 1)
          el = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
          warn format("bench: %-9s %-8s %d runs in %.0fs", name, state, runs, el)
          ratio = ->(a, b) { times[a] && times[b] && Stats.paired_ratio(times[a], times[b]) }
          overhead = lambda do |floor|
            ok = [floor, "loadscan", "bootsnap"].all? { |v| times[v] }
            ok ? Stats.overhead_ratio(times["loadscan"], times["bootsnap"], times[floor]) : nil
          end
          times.each_key do |v|
            results << {
              fixture: name, state: state, variant: v, runs: times[v].size,
              median_ms: Stats.median(times[v]) * 1000, times_ms: times[v].map { |t| (t * 1000).round(2) },
              vs_stock: ratio.(v, "stock"), vs_recorded: ratio.(v, "recorded"),
              vs_recorded_rubygems: ratio.(v, "recorded_rubygems"), vs_bootsnap: ratio.(v, "bootsnap"),
              vs_bootsnap_warm: ratio.(v, "bootsnap_warm")
            }
          end
          summary << { fixture: name, state: state,
                       loadscan_over_bootsnap_overhead: overhead.("recorded"),
                       loadscan_over_bootsnap_overhead_rubygems: overhead.("recorded_rubygems"),
                       cold_vs_bootsnap_warm: ratio.("loadscan", "bootsnap_warm") }
        end
      end
      { results: results, overheads: summary }
    end

    def report(data)
      rows = data[:results].map do |r|
        [r[:fixture], r[:state], r[:variant], format("%.1f", r[:median_ms]),
         r[:variant] == "stock" ? "1" : Runner.fmt_ratio(r[:vs_stock]),
         r[:variant] == "recorded" ? "1" : Runner.fmt_ratio(r[:vs_recorded]),
         r[:variant] == "recorded_rubygems" ? "1" : Runner.fmt_ratio(r[:vs_recorded_rubygems]),
         r[:variant] == "bootsnap" ? "1" : Runner.fmt_ratio(r[:vs_bootsnap])]
      end
      out = +"Median boot wall time (ms) and paired ratios, 99% CI in brackets (t-interval on log ratios)\n"
      out << Runner.table(%w[fixture state variant median_ms vs_stock vs_recorded vs_recorded_rubygems vs_bootsnap], rows) << "\n\n"
      orows = data[:overheads].flat_map do |o|
        FLOORS.filter_map do |floor|
          r = o[floor == "recorded" ? :loadscan_over_bootsnap_overhead : :loadscan_over_bootsnap_overhead_rubygems] or next
          [o[:fixture], o[:state], floor, format("%.1f", r[:overhead_ms]), format("%.1f", r[:ref_overhead_ms]),
           format("%.2f [%.2f–%.2f]", r[:ratio], r[:lo], r[:hi])]
        end
      end
      unless orows.empty?
        out << "Overhead above each floor, loadscan relative to Bootsnap: (loadscan−floor)/(bootsnap−floor),\n"
        out << "99% CI by paired bootstrap. Issue target: ≤ 0.10. recorded sits above RubyGems (as Bootsnap does,\n"
        out << "skipping RubyGems' default-gem activation); recorded_rubygems sits below it (as loadscan does).\n"
        out << Runner.table(%w[fixture state floor loadscan−floor_ms bootsnap−floor_ms ratio], orows)
      end
      crows = data[:overheads].select { |o| o[:cold_vs_bootsnap_warm] }.map do |o|
        med = ->(v) { data[:results].find { |r| r[:fixture] == o[:fixture] && r[:state] == "cold" && r[:variant] == v }[:median_ms] }
        [o[:fixture], format("%.1f", med.("loadscan")), format("%.1f", med.("bootsnap_warm")), Runner.fmt_ratio(o[:cold_vs_bootsnap_warm])]
      end
      unless crows.empty?
        out << "\n\nCold loadscan (no cache at all) against Bootsnap with a warm cache, paired in the cold block's\n"
        out << "rounds. Issue target: ratio < 1.\n"
        out << Runner.table(%w[fixture loadscan_cold_ms bootsnap_warm_ms ratio], crows)
      end
      out
    end
  end
end
