# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/profile_app"
require_relative "../../fixtures/rails_app"
require "json"

# The boot profile of a Rails 7.2 app (Fixtures::RailsApp) set up with loadscan as the README
# says, with slowgem (its top level sleeps 50 ms and allocates 100,000 objects) and fastgem (which
# slowgem requires) in its Gemfile: `loadscan profile` boots it as `bin/rails runner nil`.
class ProfileRailsTest < Minitest::Test
  include Loadscan::TestSupport::ProfileApp

  def setup
    reason = Fixtures::RailsApp.missing and skip reason
  end

  def rails_app(dir)
    app = Fixtures::RailsApp.generate(out: File.join(dir, "app"))
    root = app[:root]
    make_profile_gems(root)
    File.write(File.join(root, "Gemfile"), <<~RUBY, mode: "a")
      gem "loadscan", path: #{Loadscan::TestSupport::ROOT.inspect}, require: "loadscan/railtie"
      gem "slowgem", path: "gems/slowgem"
      gem "fastgem", path: "gems/fastgem"
    RUBY
    boot = File.join(root, "config", "boot.rb")
    File.write(boot, File.read(boot).sub(%(require "bundler/setup"), %(require "bundler/setup"\nrequire "loadscan/setup")))
    env = app[:env].merge("SLOWGEM_MS" => File.join(root, "tmp", "slowgem_ms"),
                          "LOADSCAN_CACHE_DIR" => File.join(root, "tmp", "cache", "loadscan"))
    lock(root, env)
    [root, env]
  end

  def test_profile_of_a_rails_boot
    with_files([]) do |dir|
      app, env = rails_app(dir)
      out = File.join(dir, "rails-boot")
      run = run_ruby(file: Loadscan::TestSupport::EXE, args: ["--json", "profile", "--output", out], chdir: app, env: env, timeout: 300)
      assert run.success?, run.stderr
      summary = JSON.parse(run.stdout)
      assert_equal [RbConfig.ruby, "bin/rails", "runner", "nil"].join(" "), summary["command"]
      assert_slowgem_first(summary["features"], app)

      entries = profile_entries(JSON.parse(File.read("#{out}.json")))
      by_id = ->(id) { entries[id] }
      slow = entries.find { |e| e["label"] == "slowgem" }
      assert_slowgem(slow, app)
      fast = entries.find { |e| e["label"] == "fastgem" }
      assert_equal slow["id"], fast["parent"], "fastgem, required by slowgem, is under it"
      assert_equal "Bundler.require", by_id.(slow["parent"])["label"], "config/application.rb's Bundler.require loads it"
      assert entries.any? { |e| e["label"] == "loadscan/setup" }, "config/boot.rb's loadscan/setup"
      outside = entries.first
      assert_equal "boot", outside["kind"]

      initializers = summary["initializers"].map { |e| e["label"] }
      assert(initializers.any? { |l| l.end_with?(": load_config_initializers") }, initializers.inspect)
      config = entries.select { |e| e["kind"] == "initializer" && e["label"].start_with?("config/initializers/") }
      refute_empty config, "each file of config/initializers, from load_config_initializer.railties"
      config.each { |e| assert_match(/: load_config_initializers\z/, by_id.(e["parent"])["label"]) }
      assert(entries.any? { |e| e["kind"] == "load" && by_id.(e["parent"])["kind"] == "initializer" && e["parent"] == config.first["id"] },
             "the initializer's file is loaded under its entry")

      problems = speedscope_problems("#{out}.json")
      assert_nil problems unless problems == :no_checker
      dom = chromium_dom("#{out}.html") or skip "no Chromium here (bin/setup installs it)"
      top = entries.select { |e| %w[require require_relative load].include?(e["kind"]) }.max_by { |e| e["self_wall"] }
      assert_equal summary["features"].first["label"], top["label"]
      assert_equal [top["label"], top["gem"], format("%.1f ms", top["self_wall"])], first_entry(dom), "the page's first file is the profile's"
    end
  end

  # The boot's self times add up to its wall time measured from outside (see ProfileTest's).
  def test_rails_boot_self_times_add_up
    with_files([]) do |dir|
      app, env = rails_app(dir)
      out = File.join(dir, "rails-boot.json")
      mark = File.join(dir, "end")
      spawned, status, err = spawn_profiled(env, [RbConfig.ruby, "bin/rails", "runner", "nil"], chdir: app, path: out, mark_last: mark)
      assert status.success?, err
      written = Float(err[/profile written to .* in ([\d.]+) ms/, 1])
      wall = Float(File.read(mark)) - spawned - written
      self_sum = profile_entries(JSON.parse(File.read(out))).sum { |e| e["self_wall"] }
      # 3%, and the 10 ms tick Linux gives the process's start time in (/proc/self/stat)
      assert_in_delta wall, self_sum, wall * 0.03 + 10, "self times #{self_sum} ms, the boot #{wall} ms"
    end
  end
end
