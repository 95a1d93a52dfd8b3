# frozen_string_literal: true
# Boot benchmark: fresh `ruby OUT/boot.rb` processes on the fixture trees, per variant and
# cache state, alternating variants round by round. See bench/README.md.
#
#   ruby bench/boot.rb [--gems 100,200,400,800] [--plain] [--[no-]debian] [--runs N]
#                      [--states cold,warm,checkout] [--only VARIANTS] [--quick] [--regen]
#
# Fixtures (bench/support/fixtures.rb): gems-N, the generated app as a real Bundler app (its boot.rb
# starts with `require "bundler/setup"`, then loads the prelude); with --plain, plain-N, the same
# app with its gem dirs put on $LOAD_PATH by hand (no Bundler at boot: the fixture of sessions 1–3).
#
# Variants (BOOT_PRELUDE files in bench/preludes/): stock (none), bootsnap (load-path cache
# only), loadscan (lib/loadscan/setup.rb), recorded (the recorded-map prelude: a feature→path
# map recorded by a stock boot; the floor, above RubyGems as Bootsnap sits), recorded_rubygems
# (the same map below RubyGems, where loadscan sits: the floor of a cache that keeps RubyGems'
# own work, default-gem activation included).
# States: cold (empty cache dir), warm (cache dir filled by the previous run), checkout
# (warm cache, then every file and dir under the fixture's app/ tree touched to a new mtime
# before each run; loadscan with LOADSCAN_VALIDATE=listing). stock and recorded have no cache:
# they run in every state's block so each ratio is paired within the same rounds. The cold
# block also runs bootsnap_warm (Bootsnap with a cache kept from its warm-up round), so "cold
# loadscan against warm Bootsnap" is a ratio paired within the same rounds too.
require "optparse"
require "etc"
require_relative "support/boot"

banner = "usage: ruby bench/boot.rb [--gems 100,200] [--[no-]debian] [--runs N] [--states cold,warm,checkout] [--quick]"
defaults = { gems: [100, 200, 400, 800], debian: nil, runs: 7, states: Bench::Boot::STATES, regen: false, only: nil, plain: false }
opts = Bench::Runner.parse(banner, defaults) do |o, opts|
  o.on("--gems LIST", Array) { |v| opts[:gems] = v.map { |s| Integer(s) } }
  o.on("--plain", "gem dirs put on $LOAD_PATH by hand (plain-N) instead of the Bundler app (gems-N)") { opts[:plain] = true }
  o.on("--[no-]debian", "realistic Debian tree (default: on Debian's Ruby with its packages installed)") { |v| opts[:debian] = v }
  o.on("--runs N", Integer) { |v| opts[:runs] = v }
  o.on("--states LIST", Array) { |v| opts[:states] = v }
  o.on("--only LIST", Array, "variants to run (e.g. loadscan,bootsnap_warm for many cold rounds)") { |v| opts[:only] = v }
  o.on("--quick", "gems 100,200, 3 runs, no Debian tree") { opts.merge!(gems: [100, 200], runs: 3, debian: false) }
  o.on("--regen", "regenerate the fixtures") { opts[:regen] = true }
end
bad = opts[:states] - Bench::Boot::STATES
abort "unknown states: #{bad.join(", ")}" unless bad.empty?
fixtures = opts[:gems].map { |n| "#{opts[:plain] ? "plain" : "gems"}-#{n}" }
debian = opts[:debian].nil? ? Bench::Fixtures.debian_bootable? : opts[:debian]
if debian && !Bench::Fixtures.debian_available?
  abort "bench: Debian packages for the realistic tree are missing (ruby fixtures/debian_tree.rb --install)"
end
fixtures << "debian" if debian
data = Bench::Boot.run(fixtures: fixtures, states: opts[:states], runs: opts[:runs], regen: opts[:regen], only: opts[:only])
text = Bench::Boot.report(data)
Bench::Runner.publish("boot", text, data.merge(ruby: RUBY_DESCRIPTION, nproc: Etc.respond_to?(:nprocessors) ? Etc.nprocessors : nil,
                                               at: Time.now.utc.to_s, runs: opts[:runs], table: text))
