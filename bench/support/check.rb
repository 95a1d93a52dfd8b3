# frozen_string_literal: true

require "fileutils"
require_relative "runner"
require_relative "fixtures"
require_relative "boot"

module Bench
  # What a variant's boot did, not how long it took: that it loads the same files as stock Ruby,
  # and that loadscan really answered the requires (a loadscan that is set up but never called
  # boots exactly like stock Ruby, only slower).
  module Check
    module_function

    # The report of one boot (fixtures/README.md, boot.rb contract), plus Loadscan.stats at exit
    # for the loadscan variant (bench/preludes/loadscan.rb).
    def report(fx, variant, tag)
      dir = File.join(OUT_DIR, "check")
      FileUtils.mkdir_p(dir)
      out = File.join(dir, "#{fx[:name]}-#{variant.name}-#{tag}.marshal")
      stats = "#{out}.stats"
      FileUtils.rm_f([out, stats])
      Runner.time_once((variant.env || {}).merge("BOOT_REPORT" => out, "BENCH_LOADSCAN_STATS" => stats), variant.argv)
      r = Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad
      r["stats"] = Marshal.load(File.binread(stats)) if File.exist?(stats) # rubocop:disable Security/MarshalLoad
      r
    end

    # Every variant of a warm boot against stock: the same results, the same files loaded from the
    # fixture in the same order, nothing stock loaded missing. A variant may load more files from
    # outside the fixture (its own: lib/loadscan, Bootsnap, the recorded-map prelude and what they
    # require). Returns [{variant:, ok:, notes:, extra:}].
    def same_as_stock(fx, only: nil)
      variants = Boot.variants_for(fx, "warm").select { |v| only.nil? || v.name == "stock" || only.include?(v.name) }
      variants.each { |v| Runner.time_once(v.env || {}, v.argv) } # fill the warm caches
      reports = variants.to_h { |v| [v.name, report(fx, v, "same")] }
      stock = reports.fetch("stock")
      inside = ->(lf) { lf.select { |f| f.start_with?("#{fx[:root]}/") } }
      reports.except("stock").map do |name, r|
        notes = []
        notes << "results differ" unless r["results"] == stock["results"]
        notes << "fixture files differ (or their order)" unless inside.(r["loaded_features"]) == inside.(stock["loaded_features"])
        missing = stock["loaded_features"] - r["loaded_features"]
        notes << "#{missing.size} of stock's features not loaded (#{missing.first(2).join(", ")})" unless missing.empty?
        extra = r["loaded_features"] - stock["loaded_features"]
        { variant: name, ok: notes.empty?, notes: notes, extra: extra.size }
      end
    end

    # A warm loadscan boot's Loadscan.stats[:hits] (requires loadscan answered) against the
    # distinct features the stock boot required by name and found on the load path after the
    # prelude's point (the recorded map, bench/preludes/record.rb).
    def engagement(fx)
      v = Boot.variants_for(fx, "warm").find { |x| x.name == "loadscan" }
      Runner.time_once(v.env, v.argv) # fill the warm cache
      r = report(fx, v, "engaged")
      required = Marshal.load(File.binread(Fixtures.ensure_recorded_map(fx))).size # rubocop:disable Security/MarshalLoad
      stats = r["stats"] || {}
      hits = stats[:hits].to_i
      { hits: hits, required: required, ratio: hits.fdiv(required), deferred: stats[:deferred], stats: stats }
    end
  end
end
