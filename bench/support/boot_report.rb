# frozen_string_literal: true
# Loaded first by the bench's Rails app (its config/boot.rb, bench/support/rails.rb) when
# BENCH_BOOT_REPORT=FILE is set: at exit (after every other at_exit handler, this one being the
# first registered) it writes Marshal.dump of what the boot did besides its time:
#   {gc: {count: 17, minor: 12, major: 5, before_boot: 1, old_objects: 140_647, heap_live_slots: …},
#    gc_runs: [{major_by: nil, gc_by: :newobj}, …, {major_by: :nofree, gc_by: :newobj}],
#    loaded_features: [...], load_path: [...] (as strings), hits: 1704 (Loadscan.stats[:hits]; nil without loadscan),
#    deferral: ["rails", 1] (how loadscan's GC deferral ended and its budget runs; nil where GC was not deferred)}
# `gc_runs` are the runs after this file was loaded (GC::Profiler, on only with
# BENCH_GC_PROFILE=1: it costs time at each run); `before_boot` counts the runs before it.
# It requires nothing.
if (bench_report = ENV["BENCH_BOOT_REPORT"]) && !bench_report.empty?
  bench_gc_before = GC.count
  GC::Profiler.enable if ENV["BENCH_GC_PROFILE"] == "1"
  at_exit do
    s = GC.stat
    runs = GC::Profiler.enabled? ? GC::Profiler.raw_data.map { |r| r[:GC_FLAGS].slice(:major_by, :gc_by) } : nil
    stats = defined?(Loadscan) && Loadscan.respond_to?(:stats) ? Loadscan.stats : nil
    File.binwrite(bench_report, Marshal.dump(
      gc: { count: s[:count], minor: s[:minor_gc_count], major: s[:major_gc_count], before_boot: bench_gc_before,
            old_objects: s[:old_objects], heap_live_slots: s[:heap_live_slots],
            total_allocated_objects: s[:total_allocated_objects] },
      gc_runs: runs, loaded_features: $LOADED_FEATURES.dup, load_path: $LOAD_PATH.map(&:to_s), hits: stats && stats[:hits],
      deferral: (g = stats && stats[:gc]) && g[:deferred] ? g.values_at(:ended_by, :budget_runs) : nil,
    ))
  end
end
