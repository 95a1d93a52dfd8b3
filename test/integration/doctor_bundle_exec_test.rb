# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/rails_app"
require "json"

# `bundle exec loadscan doctor` boots the app as `loadscan doctor` does: in the environment from
# before Bundler's setup (ChildBoot.app_env), not in the one `bundle exec` made, whose
# BUNDLER_SETUP RubyGems requires at start, before config/boot.rb's first line (loadscan would
# then answer next to nothing, and the compile cache see none of Bundler's files). On this
# Ruby's Rails app (test/support/rails_app.rb), its caches and its last boot's record written by
# a boot of its own: the trial boot's figures and the GC advice's boots are the same either way.
class DoctorBundleExecTest < Minitest::Test
  RailsApp = Loadscan::TestSupport::RailsApp
  include RailsApp::NeedsRails
  EXE = Loadscan::TestSupport::EXE
  BUNDLE = File.join(Loadscan::TestSupport::BundlerApp::BINDIR, "bundle")
  SECRET = { "SECRET_KEY_BASE" => "x" * 64 }.freeze

  def test_doctor_under_bundle_exec_boots_the_app_as_plain_doctor_does
    Dir.mktmpdir("loadscan-doctor-bundle-exec") do |tmp|
      app = rails_app!(RailsApp.app(File.realpath(tmp)))
      env = RailsApp.env(app).merge(SECRET, "LOADSCAN_CACHE_DIR" => File.join(app, "tmp", "cache", "loadscan"))
      # The app's own boot: its index, its compile cache and its last boot's record (the GC advice's).
      boot = run_ruby(command: [RbConfig.ruby, "bin/rails", "runner", "nil"], loadscan: nil, env: env, chdir: app, timeout: 300)
      assert boot.success?, boot.stderr

      plain = doctor([RbConfig.ruby, EXE], app, env)
      bundled = doctor([BUNDLE, "exec", RbConfig.ruby, EXE], app, env)
      assert_equal [true, true], [plain["set_up_by_boot"], bundled["set_up_by_boot"]]
      trial = figures(plain)
      assert_operator trial[:requires], :>, 1, "the plain trial boot's requires: #{trial.inspect}"
      assert_operator trial[:compile_cache_hits], :>, 0, "the plain trial boot's compile cache: #{trial.inspect}"
      assert_equal trial, figures(bundled), "the trial boot and the GC advice's boots, plain and under bundle exec"
      assert_equal [plain["ok"], plain["problems"]], [bundled["ok"], bundled["problems"]]
    end
  end

  private

  # `loadscan --json doctor` run by `cmd` in the app: its report.
  def doctor(cmd, app, env)
    run = run_ruby(command: [*cmd, "--json", "doctor"], loadscan: nil, env: env, chdir: app, timeout: 600)
    assert_empty run.stderr, cmd.join(" ")
    JSON.parse(run.stdout)
  end

  # What a doctor's boots did, from its report: the trial boot's requires answered by loadscan and
  # its compile cache, and the GC runs of the GC advice's boots (where it gave any).
  def figures(report)
    trial = report.fetch("trial_require")
    cache = report.fetch("stats")["compile_cache"] || {}
    advice = report["gc_settings"]
    gc = advice && %w[without_settings with_settings].to_h do |boot|
      figures = advice.fetch(boot)
      [boot, figures.slice("runs", "runs_before_setup")]
    end
    { answered: trial["answered"], hits: trial["hits"], requires: trial["requires"], compile_cache_hits: cache["hits"],
      compile_cache_compiled: cache["misses"], gc_advice: gc }
  end
end
