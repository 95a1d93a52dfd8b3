# frozen_string_literal: true
# loadscan, as config/boot.rb would have it (`require "loadscan/setup"`), loaded by absolute
# path from this checkout (or from BENCH_LOADSCAN_LIB, another lib/ dir: e.g. an older commit's
# Ruby layer, to compare). Its cache dir comes from LOADSCAN_CACHE_DIR (set by the bench).
# The load-path benchmarks compare loadscan with floors and Bootsnap that leave GC alone, so GC
# runs during their boots as in stock (LOADSCAN_GC=off); bench/gc.rb measures the boot's GC
# (BENCH_BOOT_GC=1: loadscan as users get it).
ENV["LOADSCAN_GC"] ||= "off" unless ENV["BENCH_BOOT_GC"] == "1"
lib = ENV["BENCH_LOADSCAN_LIB"]
load File.join(lib && !lib.empty? ? lib : File.expand_path("../../lib", __dir__), "loadscan", "setup.rb")
# BENCH_LOADSCAN_STATS=FILE: Loadscan.stats at exit (Marshal), for the engagement check
# (bench/check.rb, bench/gate).
if (out = ENV["BENCH_LOADSCAN_STATS"]) && !out.empty?
  at_exit { File.binwrite(out, Marshal.dump(Loadscan.stats)) }
end
