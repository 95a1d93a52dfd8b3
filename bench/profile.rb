# frozen_string_literal: true
# What the boot profile costs (README, "Boot profile"): a warm loadscan boot against the same
# boot with LOADSCAN_PROFILE set (recorded from loadscan's load to the exit, and written there as
# speedscope's JSON), on the bench's gems-N fixture (a Bundler app) and on a Rails 7.2 app
# (fixtures/rails_app.rb, `bin/rails runner nil`, loadscan set up in config/boot.rb; Ruby 3.2+).
#
#   ruby bench/profile.rb [--gems 500] [--runs 10] [--no-rails]
#
# Alternating rounds (bench/support/runner.rb), wall and CPU time of each process, medians, and
# the profiled boot's median against the unprofiled one's (the target: at most 1.15), and the
# geometric mean of the rounds' ratios (each round runs both back to back) with its 99% interval.
require "optparse"
require "tmpdir"
require "open3"
require_relative "support/runner"
require_relative "support/stats"
require_relative "support/fixtures"
require_relative "support/boot"
require_relative "../fixtures/rails_app"

module Bench
  module Profile
    module_function

    # The warm loadscan boot of gems-N, and the same profiled.
    def gems_variants(gems, out)
      fx = Fixtures.ensure("gems-#{gems}")
      base = Boot.variants_for(fx, "warm").find { |v| v.name == "loadscan" }
      [base, Variant.new(name: "loadscan+profile", env: base.env.merge("LOADSCAN_PROFILE" => File.join(out, "gems.json")), argv: base.argv)]
    end

    # A Rails 7.2 app with loadscan (a path gem of this checkout) set up in config/boot.rb.
    def rails_variants(out)
      dir = File.join(OUT_DIR, "profile-rails", Fixtures::RUBY_TAG)
      root = File.join(dir, "app")
      unless File.file?(File.join(root, ".loadscan-bench"))
        app = ::Fixtures::RailsApp.generate(out: root)
        File.write(File.join(root, "Gemfile"), %(gem "loadscan", path: #{ROOT.inspect}, require: "loadscan/railtie"\n), mode: "a")
        boot = File.join(root, "config", "boot.rb")
        File.write(boot, File.read(boot).sub(%(require "bundler/setup"), %(require "bundler/setup"\nrequire "loadscan/setup")))
        text, st = Open3.capture2e(app[:env], RUBY, Gem.bin_path("bundler", "bundle"), "lock", "--local", chdir: root)
        raise "bundle lock failed: #{text}" unless st.success?

        File.write(File.join(root, ".loadscan-bench"), "")
      end
      env = ::Fixtures::RailsApp.env(root).merge("LOADSCAN_CACHE_DIR" => File.join(dir, "cache"))
      argv = [RUBY, "bin/rails", "runner", "nil"]
      [Variant.new(name: "loadscan", env: env, argv: argv, chdir: root),
       Variant.new(name: "loadscan+profile", env: env.merge("LOADSCAN_PROFILE" => File.join(out, "rails.json")), argv: argv, chdir: root)]
    end

    def median(list) = list.sort[list.size / 2]

    def report(name, variants, runs)
      wall = Runner.alternate(variants, runs: runs, clock: :wall)
      cpu = Runner.alternate(variants, runs: runs, warmup: 0, clock: :cpu)
      base, prof = variants.map(&:name)
      w = Stats.paired_ratio(wall[prof], wall[base])
      c = Stats.paired_ratio(cpu[prof], cpu[base])
      puts format("%-10s wall %s ms → %s ms profiled: %.3f× (paired %.3f×, 99%% CI %.3f–%.3f); " \
                  "CPU %s ms → %s ms: %.3f× (paired %.3f–%.3f) (%d runs each)", name,
                  Runner.ms(median(wall[base])), Runner.ms(median(wall[prof])), median(wall[prof]) / median(wall[base]),
                  w[:ratio], w[:lo], w[:hi], Runner.ms(median(cpu[base])), Runner.ms(median(cpu[prof])),
                  median(cpu[prof]) / median(cpu[base]), c[:lo], c[:hi], runs)
    end
  end
end

opts = { gems: 500, runs: 10, rails: true }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/profile.rb [--gems 500] [--runs 10] [--no-rails]"
  o.on("--gems N", Integer) { |v| opts[:gems] = v }
  o.on("--runs N", Integer) { |v| opts[:runs] = v }
  o.on("--[no-]rails", "the Rails 7.2 app too (Ruby 3.2+ with bin/setup-rails-gems' stack)") { |v| opts[:rails] = v }
end.parse!
puts "#{RUBY_DESCRIPTION}; load average #{File.read("/proc/loadavg").split.first(3).join(" ")}"
Dir.mktmpdir("loadscan-bench-profile") do |out|
  Bench::Profile.report("gems-#{opts[:gems]}", Bench::Profile.gems_variants(opts[:gems], out), opts[:runs])
  if opts[:rails]
    reason = Fixtures::RailsApp.missing
    reason ? puts("rails: skipped (#{reason})") : Bench::Profile.report("rails", Bench::Profile.rails_variants(out), opts[:runs])
  end
end
