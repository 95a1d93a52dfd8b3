# frozen_string_literal: true
# Bootsnap 1.13's load-path scanner, timed in-process (for bench/scan.rb):
#   ruby bench/support/bootsnap_scan.rb ROOTS_FILE REPS
# prints one line per repetition: "ns requirables dirs", like the other scanners.
require "bootsnap"
require "bootsnap/load_path_cache"
roots = File.readlines(ARGV.fetch(0), chomp: true).reject(&:empty?)
Integer(ARGV.fetch(1)).times do
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
  files = dirs = 0
  roots.each do |r|
    req, ds = Bootsnap::LoadPathCache::PathScanner.call(r)
    files += req.size
    dirs += ds.size
  end
  puts "#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0} #{files} #{dirs}"
end
