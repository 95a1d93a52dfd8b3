# frozen_string_literal: true
# What each variant's warm boot did (not how long it took):
#
#   ruby bench/check.rb [--gems 200 | --plain 200 | --debian] [--only loadscan,bootsnap,…]
#
# 1. every variant (bootsnap, loadscan, both recorded-map preludes) against stock Ruby: the same `require`
#    results, the same files loaded from the fixture in the same order, none of stock's
#    `$LOADED_FEATURES` missing (a variant may add its own files from outside the fixture);
# 2. engagement: a warm loadscan boot's `Loadscan.stats[:hits]` (requires loadscan answered)
#    against the distinct features the stock boot required by name from the load path after the
#    prelude's point (the recorded map). bench/gate fails below MIN_ENGAGEMENT.
# Exit 1 when a variant differs from stock.
require "optparse"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "support/check"
require_relative "support/boot"

opts = { fixture: "gems-200", only: nil }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/check.rb [--gems N | --plain N | --debian] [--only LIST]"
  o.on("--gems N", Integer, "the Bundler app (default, 200)") { |n| opts[:fixture] = "gems-#{n}" }
  o.on("--plain N", Integer, "the same app with its gem dirs put on $LOAD_PATH by hand") { |n| opts[:fixture] = "plain-#{n}" }
  o.on("--debian") { opts[:fixture] = "debian" }
  o.on("--only LIST", Array) { |v| opts[:only] = v }
end.parse!

fx = Bench::Fixtures.ensure(opts[:fixture])
rows = Bench::Check.same_as_stock(fx, only: opts[:only])
rows.each do |r|
  puts format("%-4s %-16s %s", r[:ok] ? "ok" : "DIFF", r[:variant],
              r[:ok] ? "same results and fixture files as stock (#{r[:extra]} own files loaded besides)" : r[:notes].join("; "))
end
if opts[:only].nil? || opts[:only].include?("loadscan")
  e = Bench::Check.engagement(fx)
  puts format("engagement: Loadscan.stats[:hits] = %d for %d features required from the load path (%.1f%%; deferred %s)",
              e[:hits], e[:required], 100 * e[:ratio], e[:deferred].inspect)
end
exit(rows.all? { |r| r[:ok] } ? 0 : 1)
