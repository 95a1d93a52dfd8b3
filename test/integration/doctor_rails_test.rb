# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/rails_app"
require_relative "../../lib/loadscan"
require_relative "../../lib/loadscan/cli/output"
require_relative "../../lib/loadscan/cli/doctor"
require "json"

# `loadscan doctor` right in every state of a real Rails app (test/support/rails_app.rb: Rails
# 7.2 on 3.3 and 3.4, with Bootsnap 1.26.1 on 3.3; Debian's Rails 6.1 on 3.1, Debian's Bootsnap
# 1.13 beside it):
# - `require "loadscan/setup"` after Bootsnap's setup: Bootsnap's load-path cache answers in
#   front of loadscan, which then answers next to nothing; doctor is not ok (exit 1) and names
#   the fix, where the same app with the lines as `loadscan install` writes them is ok;
# - after a production boot, the GC advice is checked in production (the last boot's record
#   keeps its RAILS_ENV) whatever doctor's own environment, and says what it costs in RSS;
# - the app without loadscan: nothing of doctor's own process shown as the app's, the app's
#   LOADSCAN_READONLY, one fix line.
class DoctorRailsTest < Minitest::Test
  RailsApp = Loadscan::TestSupport::RailsApp
  include RailsApp::NeedsRails
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")
  SECRET = { "SECRET_KEY_BASE" => "x" * 64 }.freeze
  RUNNER = [RbConfig.ruby, "bin/rails", "runner", "nil"].freeze

  # Bootsnap set up with its load-path cache on, before loadscan: as the generator writes it
  # where the stack has Bootsnap 1.26.1 (3.3); on Debian's 3.1 its 1.13, whose JSON and YAML
  # caches would need msgpack's extension, set up by hand (its load-path cache alone).
  BOOTSNAP_FIRST = if RailsApp.rails72?
                     %(require "bootsnap/setup"\n)
                   else
                     <<~RUBY
                       require "bootsnap"
                       Bootsnap.setup(cache_dir: File.expand_path("../tmp/cache", __dir__), load_path_cache: true,
                                      compile_cache_iseq: false, compile_cache_yaml: false, compile_cache_json: false)
                     RUBY
                   end

  if RailsApp.bootsnap_stack?
    def test_loadscan_set_up_after_bootsnap_is_not_ok
      with_app do |app|
        installed = doctor(app)
        assert_equal 0, installed[:status], installed[:out]
        assert_equal [true, nil], installed[:report]["trial_require"].values_at("answered", "left_to_ruby")

        write_boot(app, %(require "bundler/setup"\n#{BOOTSNAP_FIRST}require "loadscan/setup"\n))
        boot = run_ruby(command: RUNNER, loadscan: nil, env: app_env(app, SECRET), chdir: app, timeout: 300)
        assert boot.success?, boot.stderr
        swapped = doctor(app)
        report = swapped[:report]
        assert_equal 1, swapped[:status], swapped[:out]
        refute report["ok"]
        # require reaches loadscan (the probe passes through Bootsnap), but loadscan answers nothing.
        assert_equal [true, true, "on", false, true], report.values_at("set_up_by_boot", "engaged", "bootsnap_load_path_cache",
                                                                      "bootsnap_turned_off_by_loadscan", "bootsnap_in_front")
        trial = report["trial_require"]
        assert_equal [false, "not_feature"], trial.values_at("answered", "left_to_ruby"), trial.inspect
        last = report["last_boot"]
        requires = last.values_at("hits", "misses", "deferred").sum
        assert_operator last["hits"] * 10, :<, requires, "Bootsnap in front: loadscan answered next to nothing of the last boot"
        assert_equal 1, report["problems"].size, report["problems"].inspect
        problem = report["problems"].first
        assert_match(%r{\Aloadscan must come before bootsnap/setup: Bootsnap's load-path cache answers requires in front of loadscan}, problem)
        assert_includes problem, "#{last["hits"]} of the last boot's #{requires}"
        assert_match(/run `loadscan install`, which puts `require "loadscan\/setup"` before `require "bootsnap\/setup"`/, problem)
        text = Loadscan::Doctor.text(report)
        assert_includes text, "Bootsnap's load-path cache: on, in front of loadscan (set up before it)"
        assert_includes text, "PROBLEM: #{problem}"
        refute_includes text, "ok"
      end
    end
  end

  def test_gc_advice_is_checked_in_the_environment_of_the_last_boot
    with_app do |app|
      production = SECRET.merge(RailsApp.production)
      boot = run_ruby(command: RUNNER, loadscan: nil, env: app_env(app, production), chdir: app, timeout: 300)
      assert boot.success?, boot.stderr
      # doctor itself in development (no RAILS_ENV), with what the app needs to boot in production.
      run = doctor(app, env: production.merge("RAILS_ENV" => nil, "RACK_ENV" => nil))
      report = run[:report]
      production_env = { "RAILS_ENV" => "production", "RACK_ENV" => nil }
      assert_equal [nil, production_env], [report["environment"]["RAILS_ENV"], report["last_boot"]["environment"]]
      gc = report["last_boot"]["gc"]
      deferred = Loadscan::TestSupport.gc_deferred?
      advice = report.fetch("gc_settings")
      if deferred && gc["runs_before_setup"].to_i.zero?
        # A Ruby whose startup allocates less than its first heap holds (4.1-dev's) runs no GC
        # before loadscan's first-line setup: nothing to advise, and doctor says nothing of it.
        assert_nil advice, gc.inspect
        refute Loadscan::Doctor.text(report).any? { |l| l.start_with?("GC settings") }
        skip "no GC run before loadscan's setup on #{RUBY_VERSION}: the advice's figures are checked on 3.4 and 4.0"
      end
      refute_nil advice, "the production boot ran GC: #{gc.inspect}"
      assert_equal [deferred, deferred ? "before setup" : "boot"], [gc["deferred"], advice["part"]]
      assert_equal production_env, advice["environment"]
      %w[without_settings with_settings].each do |boot_with|
        figures = advice.fetch(boot_with)
        assert_equal production_env, figures["environment"], "#{boot_with}: the boot ran in production"
        assert_operator figures["rss_kb"], :>, 0, boot_with
      end
      text = Loadscan::Doctor.text(report)
      assert_match(/\AGC settings for the last boot's \d+ GC runs #{deferred ? "before loadscan's setup" : "in the boot"}, sized to its live objects and checked in the last boot's environment \(RAILS_ENV=production\);/,
                   text.grep(/^GC settings/).first)
      assert_match(/\A  a boot without them: \d+ GC runs .*, \d+(\.\d+)? ms of GC; RSS \d+\.\d MiB at its end\z/, text.grep(/^  a boot without/).first)
      assert_match(/\A  a boot with them: .*; RSS \d+\.\d MiB at its end; against a boot without them: -?\d+\.\d ms of GC saved, [+-]\d+\.\d MiB of RSS \([+-]\d+%\)\z/,
                   text.grep(/^  a boot with them/).first)
      assert_match(/\(pid \d+, Ruby #{Regexp.escape(RUBY_VERSION)}, RAILS_ENV=production\): /, text.grep(/^last boot: /).first)
    end
  end

  # The app as it was before `loadscan install`: neither its Gemfile nor its config/boot.rb has
  # loadscan (Bootsnap's setup stays where the stack has it).
  def test_an_app_without_loadscan
    with_app do |app|
      gemfile = File.join(app, "Gemfile")
      File.write(gemfile, File.read(gemfile).lines.grep_v(/^gem "loadscan"/).join)
      Loadscan::TestSupport::BundlerApp.bundle_lock(app, RailsApp.env_overrides)
      bootsnap = RailsApp.bootsnap_stack? && RailsApp.rails72? ? BOOTSNAP_FIRST : ""
      write_boot(app, %(require "bundler/setup"\n#{bootsnap}))
      run = doctor(app, json: false)
      lines = run[:out].lines.map(&:chomp)
      assert_equal 1, run[:status], run[:out]
      assert_includes lines, "loadscan set up by the boot: no"
      assert_equal 1, lines.grep(/^require reaches loadscan: no: the boot does not set it up \(Kernel#require: /).size, run[:out]
      assert_empty lines.grep(/^(index|requires answered by loadscan): /), "doctor's own process's"
      assert_match(/^settings \(the environment's; the boot does not set loadscan up\): .*readonly=false/, run[:out])
      if bootsnap.empty?
        assert_empty lines.grep(/^Bootsnap/)
      else
        assert_includes lines, "Bootsnap's load-path cache: on"
      end
      problems = lines.grep(/^PROBLEM: /)
      assert_equal 1, problems.size, run[:out]
      # Before Bootsnap's setup where the boot has one.
      before = bootsnap.empty? ? "" : ' and before `require "bootsnap/setup"`'
      assert_match(/\APROBLEM: config\/boot.rb does not set loadscan up: run `loadscan install`: .* after `require "bundler\/setup"`#{before} to config\/boot.rb\z/,
                   problems.first)

      report = doctor(app, env: { "LOADSCAN_READONLY" => "1" })[:report]
      assert_equal [false, false, false, nil, nil, true],
                   report.values_at("set_up_by_boot", "active", "engaged", "stats", "trial_require") + [report["settings"]["readonly"]]
      assert_equal false, report["bootsnap_turned_off_by_loadscan"] unless bootsnap.empty?
      assert_nil report["last_boot"], "no boot recorded any: the app never set loadscan up"
    end
  end

  private

  # A copy of this Ruby's Rails app of the test's own.
  def with_app
    Dir.mktmpdir("loadscan-doctor-rails") do |tmp|
      yield rails_app!(RailsApp.app(File.realpath(tmp)))
    end
  end

  def write_boot(app, requires)
    File.write(File.join(app, "config", "boot.rb"), %(ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)\n#{requires}))
  end

  # The app's environment, its cache dir the app's own (run_ruby would give each run one).
  def app_env(app, env = {})
    RailsApp.env(app).merge("LOADSCAN_CACHE_DIR" => File.join(app, "tmp", "cache", "loadscan")).merge(env)
  end

  # `loadscan [--json] doctor` in the app, in the app's environment (its cache dir: the app's own).
  def doctor(app, env: {}, json: true)
    run = run_ruby(file: EXE, args: [*("--json" if json), "doctor"], loadscan: nil, chdir: app, timeout: 600,
                   env: app_env(app, "LOADSCAN_READONLY" => nil).merge(env))
    assert_empty run.stderr
    { out: run.stdout, status: run.status.exitstatus, report: json ? JSON.parse(run.stdout) : nil }
  end
end
