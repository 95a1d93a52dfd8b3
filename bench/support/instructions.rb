# frozen_string_literal: true
# Bench::Instructions: instructions per boot under callgrind. bench/instructions.rb runs it;
# the Rails fixture (support/rails_app.rb) counts with it.
require "etc"
require "fileutils"
require_relative "runner"
require_relative "fixtures"
require_relative "boot"

module Bench
  module Instructions
    module_function

    # Instructions of one run of `variant` under callgrind (the process and its threads).
    def count(variant, out)
      log = "#{out}.log"
      cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=#{out}", *variant.argv]
      system(variant.env || {}, *cmd, out: File::NULL, err: log, chdir: variant.chdir || Dir.pwd) or raise "callgrind failed for #{variant.name}: #{File.read(log)[-2000..]}"
      File.read(log)[/Collected : (\d+)/, 1]&.to_i or raise "no instruction count in #{log}"
    end

    # {variant => instructions} for a warm boot of `fixture`; `only` limits the variants.
    def run(fixture, jobs:, only: nil)
      fx = Fixtures.ensure(fixture)
      variants = Boot.variants_for(fx, "warm").select { |v| only.nil? || only.include?(v.name) }
      variants.each { |v| Runner.time_once(v.env || {}, v.argv) } # fill the warm caches
      count_all(variants, fx[:name], jobs: jobs)
    end

    # {variant name => instructions} of one run of each variant, `jobs` at a time; the callgrind
    # files are tmp/bench/callgrind/<tag>-<variant>.out.
    def count_all(variants, tag, jobs:)
      dir = File.join(OUT_DIR, "callgrind")
      FileUtils.mkdir_p(dir)
      queue = Queue.new
      variants.each { |v| queue << v }
      jobs.times { queue << nil }
      counts = {}
      Array.new(jobs) do
        Thread.new do
          while (v = queue.pop)
            counts[v.name] = count(v, File.join(dir, "#{tag}-#{v.name.tr("^A-Za-z0-9_.-", "_")}.out"))
          end
        end
      end.each(&:join)
      variants.to_h { |v| [v.name, counts.fetch(v.name)] }
    end

    # (loadscan − floor)/(bootsnap − floor) in instructions.
    def overhead_ratio(counts, floor)
      (counts["loadscan"] - counts[floor]).to_f / (counts["bootsnap"] - counts[floor])
    end

    def report(fixture, counts)
      m = ->(n) { format("%.1f", n / 1e6) }
      vs = ->(n, ref) { counts[ref] ? format("%.3f", n.to_f / counts[ref]) : "-" }
      rows = counts.sort_by { |_, n| n }.map do |v, n|
        [fixture, v, m.(n), vs.(n, "stock"), vs.(n, "recorded_rubygems")]
      end
      out = +"Instructions per warm boot (millions; callgrind, user space only)\n"
      out << Runner.table(%w[fixture variant instructions_M vs_stock vs_recorded_rubygems], rows) << "\n\n"
      out << "Overhead above each floor in instructions, loadscan relative to Bootsnap. Issue target: ≤ 0.10.\n"
      orows = Boot::FLOORS.map do |floor|
        ours = counts["loadscan"] - counts[floor]
        ref = counts["bootsnap"] - counts[floor]
        [fixture, floor, m.(ours), m.(ref), format("%.3f", overhead_ratio(counts, floor))]
      end
      out << Runner.table(%w[fixture floor loadscan−floor_M bootsnap−floor_M ratio], orows)
    end
  end
end
