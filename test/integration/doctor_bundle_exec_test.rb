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
      trial = trial_figures(plain)
      # Rails 7.2's app sets loadscan up at config/boot.rb's first line (`loadscan install`'s), before
      # Bundler's setup, whose requires it answers and serves; Debian's Rails 6.1 app (Ruby 3.1)
      # after it (BundlerApp.rails_app): its trial boot has the trial require alone, either way.
      if RailsApp.rails72?
        assert_operator trial[:requires], :>, 1, "the plain trial boot's requires: #{trial.inspect}"
        assert_operator trial[:compile_cache_hits], :>, 0, "the plain trial boot's compile cache: #{trial.inspect}"
      end
      assert_equal trial, trial_figures(bundled), "the trial boot, plain and under bundle exec"
      assert_same_gc_advice plain["gc_settings"], bundled["gc_settings"]
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

  # The trial boot's figures in a doctor's report: the requires loadscan answered and what the
  # compile cache served and left to Ruby.
  def trial_figures(report)
    trial = report.fetch("trial_require")
    cache = report.fetch("stats")["compile_cache"] || {}
    { answered: trial["answered"], hits: trial["hits"], requires: trial["requires"], compile_cache_hits: cache["hits"],
      compile_cache_compiled: cache["misses"] }
  end

  # The GC advice's boots ran alike (or neither doctor gave any advice): the GC runs of the part
  # it covers, the same with the settings (none left before setup, where GC is deferred), and
  # without them the same but for the one or two runs a whole boot's GC varies by from one run to
  # the next (Ruby 3.3: 24 to 26 of doctor's own, plain). Under `bundle exec` without its
  # environment (Ruby 3.4) they were 8 and 4 runs before setup, against 4 and 0.
  def assert_same_gc_advice(plain, bundled)
    return assert_nil bundled, "no GC advice from plain doctor" unless plain

    refute_nil bundled, "GC advice from plain doctor: #{plain.inspect}"
    assert_equal plain["part"], bundled["part"]
    runs = plain["part"] == "boot" ? "runs" : "runs_before_setup"
    assert_equal plain["with_settings"][runs], bundled["with_settings"][runs], "#{runs} of a boot with the settings"
    without = plain["without_settings"][runs]
    assert_in_delta without, bundled["without_settings"][runs], 1 + without / 10, "#{runs} of a boot without the settings"
  end
end
