# frozen_string_literal: true

require_relative "../../test_helper"
require "json"
require_relative "../../../fixtures/rails_app"

# `loadscan doctor` on CI (CI set) with an app whose boot sets up Bootsnap's compile cache beside
# loadscan (the lines `loadscan install` writes: Bootsnap's load-path cache off): a fresh checkout
# misses that cache for every file unless BOOTSNAP_REVALIDATE is set, and doctor says so, as a
# note (exit 0). The real Bootsnap of the Ruby's stack: 1.26.1 on Ruby 3.3.8 (bin/setup-rails-gems),
# Debian's 1.13 on Debian's Ruby 3.1 (which cannot revalidate).
class DoctorCITest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  # The environment that finds this Ruby's Bootsnap, or nil where it has none.
  def bootsnap_env
    if RbConfig::CONFIG["prefix"] == "/usr"
      system(RbConfig.ruby, "-e", 'require "bootsnap"', out: File::NULL, err: File::NULL) ? {} : nil
    elsif Fixtures::RailsApp.bootsnap?
      { "GEM_PATH" => [Fixtures::RailsApp.home, Gem.default_dir].join(File::PATH_SEPARATOR), "GEM_HOME" => Fixtures::RailsApp.home }
    end
  end

  def doctor(dir, env)
    run = run_ruby(file: EXE, args: ["--json", "doctor"], chdir: "#{dir}/app",
                   env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache", "CI" => nil, "BOOTSNAP_REVALIDATE" => nil }.merge(bootsnap_env, env))
    assert_equal 0, run.status.exitstatus, run.stdout + run.stderr
    JSON.parse(run.stdout)
  end

  def test_doctor_on_ci_names_bootsnap_revalidate
    skip "this Ruby's stack has no Bootsnap (Ruby 3.3.8's and Debian's 3.1 have)" unless bootsnap_env

    # bootsnap/setup as `loadscan install` leaves it (Debian's 1.13 there fails to load msgpack for
    # its YAML cache: its compile cache for Ruby only, set up by hand, on that Ruby).
    bootsnap = if RbConfig::CONFIG["prefix"] == "/usr"
                 'require "bootsnap"; Bootsnap.setup(cache_dir: ENV["BOOTSNAP_CACHE_DIR"], load_path_cache: false, ' \
                   "compile_cache_iseq: true, compile_cache_yaml: false, compile_cache_json: false)"
               else
                 'require "bootsnap/setup"'
               end
    boot = <<~RUBY
      ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"] = "1"
      ENV["BOOTSNAP_CACHE_DIR"] = File.expand_path("../tmp/cache", __dir__)
      #{bootsnap}
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}
    RUBY
    with_files([["app/config/boot.rb", boot]]) do |dir|
      report = doctor(dir, "CI" => "true")
      version = report.dig("bootsnap", "version")
      assert report.dig("bootsnap", "compile_cache"), "the boot set Bootsnap's compile cache up: #{report["bootsnap"].inspect}"
      assert report["ok"], report["problems"].inspect
      note = report.fetch("notes").first
      assert_match(/\Aon CI, Bootsnap's compile cache misses every file of a fresh checkout/, note)
      if Gem::Version.new(version) >= Gem::Version.new("1.18")
        assert_match(/set BOOTSNAP_REVALIDATE=1 in CI's environment/, note)
        refute doctor(dir, "CI" => "true", "BOOTSNAP_REVALIDATE" => "1").key?("notes"), "revalidating: nothing to say"
      else
        assert_match(/Bootsnap #{Regexp.escape(version)} cannot revalidate/, note)
        assert_equal [note], doctor(dir, "CI" => "true", "BOOTSNAP_REVALIDATE" => "1")["notes"], "this Bootsnap ignores it"
      end
      refute doctor(dir, {}).key?("notes"), "not on CI: nothing to say"
      run = run_ruby(file: EXE, args: ["doctor"], chdir: "#{dir}/app",
                     env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache", "CI" => "1", "BOOTSNAP_REVALIDATE" => nil }.merge(bootsnap_env))
      assert_includes run.stdout.lines.map(&:chomp), "note: #{note}"
    end
  end
end
