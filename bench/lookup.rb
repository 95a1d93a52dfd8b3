# frozen_string_literal: true
# ns per lookup, in one process whose $LOAD_PATH has the fixture's dirs in front (as its boot.rb
# would set it), after `require_relative "../lib/loadscan"; Loadscan.setup`:
#
#   ruby bench/lookup.rb [--gems 200 | --debian] [--rounds 7]
#
# Keys: hit = every String feature the fixture's stock boot required (the recorded map, bench/
# preludes/record.rb), none of them loaded by this process's boot; miss = as many names that
# exist nowhere. Methods: Hash#[] on the recorded map (the floor of any in-Ruby cache),
# Loadscan.lookup, `require` of a hit once it is loaded (RubyGems' `require`, then loadscan's
# decorator, which answers `false`: what a program pays for every feature it requires again;
# hits only), `$LOAD_PATH.resolve_feature_path` (loadscan's decorator), and Ruby's own
# `resolve_feature_path` (its probing, for scale). Rounds alternate the methods; the table shows
# the median round. Includes the `each` loop's own cost (shown as `empty loop`).
require "optparse"
require_relative "support/runner"
require_relative "support/fixtures"

opts = { fixture: "gems-200", rounds: 7 }
OptionParser.new do |o|
  o.on("--gems N", Integer) { |n| opts[:fixture] = "gems-#{n}" }
  o.on("--debian") { opts[:fixture] = "debian" }
  o.on("--rounds N", Integer) { |n| opts[:rounds] = n }
end.parse!

fx = Bench::Fixtures.ensure(opts[:fixture])
map = Marshal.load(File.binread(Bench::Fixtures.ensure_recorded_map(fx)))
manifest = Bench::Fixtures.manifest(fx)
(manifest[:removed_prefixes] || []).each do |pre|
  $LOAD_PATH.reject! { |e| (s = e.to_s) == pre || s.start_with?("#{pre}/") }
end
$LOAD_PATH.unshift(*manifest[:load_path])
require_relative "../lib/loadscan"
abort "bench: loadscan not active (rake compile?)" unless Loadscan.setup

hits = map.keys.select { |k| k.is_a?(String) && !k.start_with?("/", "./", "../") && !$LOADED_FEATURES.include?(map[k]) }
misses = hits.each_with_index.map { |k, i| "nope_#{i}/#{k}" }
# The stock boot ordered its entries through Bundler; this process puts the fixture's in front,
# so a feature two gems both have (the fixture shadows some on purpose) can differ from the
# recorded map: Ruby's own search in this process is what loadscan must agree with.
agree = hits.count { |k| Loadscan.lookup(k) == map[k] }
ruby_resolve = ->(k) { Loadscan::CoreExt::LoadPath.ruby_resolve_feature_path(k) }
agree_ruby = hits.count { |k| Loadscan.lookup(k) == ((ruby_resolve.(k) rescue nil)&.last || :missing) }
abort "bench: no hit keys" if hits.empty?
# Loaded once, as the boot loads them (a file that fails to load is left out of the require row).
hits.each { |k| require k rescue nil } # rubocop:disable Style/RescueModifier
loaded = hits.select { |k| $LOADED_FEATURES.include?(Loadscan.lookup(k)) }

def time_ns(keys, iters)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
  iters.times { keys.each { |k| yield k } }
  (Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0).fdiv(iters * keys.size)
end

# name => [fn, iterations over the hits, over the misses]: a miss that loadscan is sure of costs
# one `stat` per entry (`confirm_missing`), so misses go round once; `require` of a miss would
# raise (RubyGems then searches its specs), so it has hits only; Ruby's probing is slow: its
# first 200 keys only.
methods = {
  "empty loop" => [->(_k) {}, 200, 200],
  "Hash#[]" => [->(k) { map[k] }, 200, 200],
  "Loadscan.lookup" => [->(k) { Loadscan.lookup(k) }, 50, 1],
  "require (loaded)" => [->(k) { require k }, 50, nil],
  "resolve_feature_path" => [->(k) { $LOAD_PATH.resolve_feature_path(k) }, 50, 1],
  "Ruby's resolve_feature_path" => [ruby_resolve, 1, 1, 200],
}
samples = Hash.new { |h, k| h[k] = [] }
opts[:rounds].times do |r|
  methods.to_a.rotate(r % methods.size).each do |name, (fn, hit_iters, miss_iters, limit)|
    keys = { "hit" => name.start_with?("require") ? loaded : hits, "miss" => misses }
    { "hit" => hit_iters, "miss" => miss_iters }.each do |kind, iters|
      next unless iters

      samples[[name, kind]] << time_ns(keys[kind].first(limit || keys[kind].size), iters) { |k| fn.(k) }
    end
  end
end

rows = methods.keys.map do |name|
  h = Bench::Stats.median(samples[[name, "hit"]])
  m = samples.key?([name, "miss"]) ? format("%.0f", Bench::Stats.median(samples[[name, "miss"]])) : "-"
  hh = Bench::Stats.median(samples[["Hash#[]", "hit"]])
  [name, format("%.0f", h), m, format("%.1f", h / hh)]
end
text = "lookup on #{fx[:name]}: #{hits.size} hit keys (loadscan agrees with Ruby's own search in this process on " \
       "#{agree_ruby}, with the stock boot's recorded map on #{agree}; #{loaded.size} loaded for the require row), " \
       "#{misses.size} miss keys, #{$LOAD_PATH.size} $LOAD_PATH entries; median of #{opts[:rounds]} rounds\n" +
       Bench::Runner.table(["method", "ns/hit", "ns/miss", "hit vs Hash#[]"], rows)
puts text
json = Bench::Runner.write_json("lookup-#{fx[:name]}", {
  fixture: fx[:name], hits: hits.size, misses: misses.size, agree: agree, agree_ruby: agree_ruby, loaded: loaded.size,
  load_path: $LOAD_PATH.size,
  ns: samples.map { |(n, k), v| { method: n, kind: k, median_ns: Bench::Stats.median(v), samples: v } },
  table: text, at: Time.now.utc.to_s
})
puts "\nJSON: #{json}"
