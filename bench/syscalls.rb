# frozen_string_literal: true
# File-system syscalls per boot variant (warm caches), under strace:
#
#   ruby bench/syscalls.rb [--gems 200 | --plain 200 | --debian]
#
# 1. `strace -f -c -e trace=openat,stat,newfstatat,statx,access,readlink` per variant: calls and
#    errors per syscall. Ruby 3.1 on Debian 12 (glibc 2.36, x86_64) probes with openat and
#    newfstatat and canonicalises with readlink (realpath); it does not use stat/statx/access.
# 2. `strace -f -Z` (failed calls only) with the same set, to count failed calls on paths INSIDE
#    the fixture tree — the $LOAD_PATH probing misses. Target for loadscan: zero for features
#    that are in the index (the oracle shows what is left when every feature resolves directly).
require "optparse"
require "fileutils"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "boot"

opts = { fixture: "gems-200" }
OptionParser.new do |o|
  o.on("--gems N", Integer) { |n| opts[:fixture] = "gems-#{n}" }
  o.on("--plain N", Integer, "the app with gem dirs put on $LOAD_PATH by hand, no Bundler") { |n| opts[:fixture] = "plain-#{n}" }
  o.on("--debian") { opts[:fixture] = "debian" }
end.parse!
abort "bench: strace not found (bin/setup installs it)" unless system("strace -V >/dev/null 2>&1")

TRACE = "openat,stat,newfstatat,statx,access,readlink"
fx = Bench::Fixtures.ensure(opts[:fixture])
variants = Bench::Boot.variants_for(fx, "warm")
entries = Marshal.load(File.binread(Dir[File.join(fx[:root], "{app,debian_tree}.marshal")].first))[:load_path]
            .sort_by { |e| -e.size } # longest first: nested entries
# fill the warm caches
variants.each { |v| Bench::Runner.time_once(v.env || {}, v.argv) }

dir = File.join(Bench::OUT_DIR, "strace")
FileUtils.mkdir_p(dir)
results = variants.map do |v|
  sum = File.join(dir, "#{fx[:name]}-#{v.name}.summary")
  failed = File.join(dir, "#{fx[:name]}-#{v.name}.failed")
  system(v.env || {}, "strace", "-f", "-c", "-o", sum, "-e", "trace=#{TRACE}", *v.argv, out: File::NULL) or abort "strace failed"
  system(v.env || {}, "strace", "-f", "-Z", "-o", failed, "-e", "trace=#{TRACE}", *v.argv, out: File::NULL) or abort "strace failed"
  per = {}
  File.foreach(sum) do |l|
    f = l.split
    next unless f.size >= 5 && f[0] =~ /\A[\d.]+\z/ && f.last !~ /total/

    errors = f.size == 6 ? f[4].to_i : 0
    per[f.last] = { calls: f[3].to_i, errors: errors }
  end
  inside = outside = 0
  enoent_inside = Hash.new(0)
  features = Hash.new(0)
  File.foreach(failed) do |l|
    path = l[/"([^"]*)"/, 1] or next
    if path.start_with?("#{fx[:root]}/")
      inside += 1
      next unless l.include?("ENOENT")

      enoent_inside[l[/\A\d+\s+(\w+)\(/, 1]] += 1
      entry = entries.find { |e| path.start_with?("#{e}/") }
      features[path.delete_prefix("#{entry}/").sub(/\.(rb|so)\z/, "")] += 1 if entry
    else
      outside += 1
    end
  end
  { variant: v.name, per: per, failed_in_fixture: inside, enoent_in_fixture: enoent_inside,
    enoent_features: features.sort_by { |_, n| -n }.to_h, failed_elsewhere: outside }
end

names = %w[openat newfstatat readlink stat statx access]
rows = results.map do |r|
  [r[:variant]] + names.map { |n| (x = r[:per][n]) ? "#{x[:calls]}/#{x[:errors]}" : "0/0" } +
    [r[:enoent_in_fixture]["openat"], r[:enoent_in_fixture]["newfstatat"], r[:enoent_features].size,
     r[:enoent_features].keys.first(6).join(" ")]
end
text = "Syscalls of one warm boot of #{fx[:name]} (calls/failed; strace -f), and failed calls by path\n" +
       Bench::Runner.table(["variant"] + names + %w[ENOENT_openat_in_fixture ENOENT_stat_in_fixture features_probed top_probed_features], rows) +
  "\n(readlink failures are EINVAL from realpath on non-links; ENOENT_*_in_fixture: failed probes of paths\n" \
  "inside the fixture's load-path entries, i.e. $LOAD_PATH searches; features_probed: distinct features probed)"
puts text
puts "\nJSON: #{Bench::Runner.write_json("syscalls-#{fx[:name]}", { fixture: fx[:name], results: results, table: text, at: Time.now.utc.to_s })}"
puts "strace logs: #{dir}"
