# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/profile_app"
require_relative "../../fixtures/rails_app"
require_relative "../../lib/loadscan/profile/report"
require "json"

# The boot profile of a Rails 7.2 app (Fixtures::RailsApp) set up with loadscan as the README
# says, with slowgem (its top level sleeps 50 ms and allocates 100,000 objects) and fastgem (which
# slowgem requires) in its Gemfile: `loadscan profile` boots it as `bin/rails runner nil`.
class ProfileRailsTest < Minitest::Test
  include Loadscan::TestSupport::ProfileApp

  def setup
    reason = Fixtures::RailsApp.missing and skip reason
  end

  # The app; with `loadscan: false`, as it was before loadscan (Bootsnap set up where this
  # Ruby's stack has it, and nothing of loadscan's but what `loadscan profile` brings).
  def rails_app(dir, loadscan: true)
    app = Fixtures::RailsApp.generate(out: File.join(dir, "app"))
    root = app[:root]
    make_profile_gems(root)
    File.write(File.join(root, "Gemfile"), <<~RUBY, mode: "a")
      #{%(gem "loadscan", path: #{Loadscan::TestSupport::ROOT.inspect}, require: "loadscan/railtie") if loadscan}
      gem "slowgem", path: "gems/slowgem"
      gem "fastgem", path: "gems/fastgem"
      gem "busygem", path: "gems/busygem"
    RUBY
    # An initializer that spends 100 ms in a method of another gem, requiring nothing.
    File.write(File.join(root, "config", "initializers", "busy.rb"), "Busygem.work(100)\n")
    boot = File.join(root, "config", "boot.rb")
    File.write(boot, File.read(boot).sub(%(require "bundler/setup"), %(require "bundler/setup"\nrequire "loadscan/setup"))) if loadscan
    env = app[:env].merge("SLOWGEM_MS" => File.join(root, "tmp", "slowgem_ms"), "BUSYGEM_MS" => File.join(root, "tmp", "busygem_ms"),
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

      # (every method: on a loaded machine others can outrank its 100 ms)
      report = Loadscan::Profile::Report.text(Loadscan::Profile::Tree.from_speedscope(JSON.parse(File.read("#{out}.json"))), top: 100_000)
      assert_busygem_named(summary, entries, report.join("\n"), File.read("#{out}.html"), app)

      problems = speedscope_problems("#{out}.json")
      assert_nil problems unless problems == :no_checker
      dom = chromium_dom("#{out}.html") or skip "no Chromium here (bin/setup installs it)"
      top = entries.select { |e| %w[require require_relative load].include?(e["kind"]) }.max_by { |e| own(e) }
      assert_equal summary["features"].first["label"], top["label"]
      assert_equal [top["label"], top["gem"], page_ms(own(top))], first_entry(dom), "the page's first file is the profile's"
      assert_match(%r{<tr class="call"><td class="label">Busygem\.work</td><td class="gem">busygem</td>}, dom, "the page's methods") if sampling?
    end
  end

  # The time the initializer spent in Busygem.work (sampled) is that method's, in the summary,
  # the JSON and the page's data; the initializer keeps its own few ms. (Samples need Ruby 3.3.)
  def assert_busygem_named(summary, entries, report, html, app)
    return assert_empty(summary["calls"], "no samples before Ruby 3.3") unless sampling?

    own = Float(File.read(File.join(app, "tmp", "busygem_ms")))
    call = summary["calls"].find { |c| c["label"] == "Busygem.work" }
    refute_nil call, summary["calls"].first(5).inspect
    assert_equal "busygem", call["gem"]
    # its own clock's time, less the stretch before the first sample (an interval: 1 ms, more on a loaded machine)
    assert_in_delta own, call["self_ms"] + call["gc_ms"], [own * 0.2, 20].max, "Busygem.work's own clock said #{own} ms"
    assert_operator call["self_ms"] + call["gc_ms"], :>=, 80
    assert_operator call["self_ms"] + call["gc_ms"], :<=, 120 if own <= 105
    load = entries.find { |e| e["kind"] == "load" && e["file"]&.end_with?("config/initializers/busy.rb") }
    assert_operator load["self_wall"], :<, 20, "the initializer's own time, less its call's"
    assert_operator entries.count { |e| e["kind"] == "call" && e["label"] == "Busygem.work" && e["parent"] == load["id"] }, :>=, 1
    assert_match(/Busygem\.work \[busygem\]/, report, "the report names it")
    assert_includes html, "Busygem.work [busygem]", "the page's data names it"
  end

  # The production boot eager-loads TZInfo's zone data (ActiveSupport puts TZInfo among the
  # namespaces Rails' eager_load! initializer loads): that time is TZInfo.eager_load!'s, in
  # tzinfo, not the initializer's nor railties'.
  def test_production_boot_names_tzinfo
    with_files([]) do |dir|
      app, env = rails_app(dir)
      out = File.join(dir, "prod")
      env = env.merge("RAILS_ENV" => "production", "SECRET_KEY_BASE_DUMMY" => "1")
      run = run_ruby(file: Loadscan::TestSupport::EXE, args: ["--json", "profile", "--output", out], chdir: app, env: env, timeout: 300)
      assert run.success?, run.stderr
      summary = JSON.parse(run.stdout)
      unless sampling?
        assert_empty summary["calls"], "no samples before Ruby 3.3"
        next
      end
      tz = summary["calls"].find { |c| c["label"] == "TZInfo.eager_load!" }
      refute_nil tz, summary["calls"].first(5).inspect
      assert_equal "tzinfo", tz["gem"]
      assert_equal "App::Application: eager_load!", tz["from"]
      files = summary["features"].select { |f| f["gem"] == "tzinfo" }.sum { |f| f["self_ms"] }
      assert_operator tz["self_ms"], :>, files, "tzinfo's time is the zones it reads, not its files' loading"
      eager = summary["initializers"].find { |e| e["label"] == "App::Application: eager_load!" }
      assert_operator eager["self_ms"], :<, tz["self_ms"], "the initializer keeps its own time only"
    end
  end

  # Whether this Ruby can take stack samples (rb_postponed_job_trigger: 3.3 and later).
  def sampling? = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")

  # A Bootsnap-only app profiles with the entries a loadscan app has: Bootsnap's `require`
  # calls the one it wrapped again with the resolved path, which is no entry of its own.
  def test_profile_of_an_app_without_loadscan
    skip "no Bootsnap in this Ruby's Rails stack (3.3 has it)" unless Fixtures::RailsApp.bootsnap?
    with_files([]) do |dir|
      counts = [true, false].map do |loadscan|
        app, env = rails_app(File.join(dir, loadscan.to_s), loadscan: loadscan)
        out = File.join(dir, "boot-#{loadscan}")
        run = run_ruby(file: Loadscan::TestSupport::EXE, args: ["--json", "profile", "--output", out], chdir: app, env: env, timeout: 300)
        assert run.success?, run.stderr
        entries = profile_entries(JSON.parse(File.read("#{out}.json")))
        files = entries.select { |e| %w[require require_relative load].include?(e["kind"]) }
        # (a file of config/initializers is an initializer whose entry is its load)
        repeats = files.select { |e| (p = entries[e["parent"]]) && p["kind"] != "initializer" && p["file"] == e["file"] }
        assert_empty repeats.first(3), "entries that repeat their parent's file (loadscan: #{loadscan})"
        files.reject { |e| %w[loadscan bootsnap].include?(e["gem"]) }.size
      end
      assert_equal counts[0], counts[1], "file entries outside loadscan and Bootsnap: with loadscan, Bootsnap only"
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
