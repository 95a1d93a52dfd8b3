# frozen_string_literal: true

require_relative "../test_helper"

# `loadscan install` (exe/loadscan in a real process) on apps' Gemfile and config/boot.rb: the
# edits, the diff it shows, --dry-run, a second run, and the boot.rb files it refuses to edit.
# test/integration/install_test.rb boots a real Rails app after it.
class InstallerTest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")
  GEMFILE = %(source "https://rubygems.org"\ngem "rails"\ngem "bootsnap", require: false\n)
  RAILS_BOOT = <<~RUBY
    ENV['BUNDLE_GEMFILE'] ||= File.expand_path('../Gemfile', __dir__)

    require "bundler/setup" # Set up gems listed in the Gemfile.
    require "bootsnap/setup" # Speed up boot time by caching expensive operations.
  RUBY

  def install(dir, *args)
    run = run_ruby(file: EXE, args: [*args, "install"], env: { "BUNDLE_GEMFILE" => nil }, chdir: dir)
    [run.stdout, run.stderr, run.status.exitstatus]
  end

  def files(dir) = %w[Gemfile config/boot.rb].to_h { |f| [f, File.exist?(File.join(dir, f)) && File.read(File.join(dir, f))] }

  def test_rails_app_with_bootsnap_dry_run_then_install_then_nothing
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT], ["config/application.rb", ""]]) do |dir|
      before = files(dir)
      out, err, status = install(dir, "--dry-run")
      assert_equal [0, ""], [status, err]
      assert_equal before, files(dir), "--dry-run wrote"
      assert_includes out, %(+gem "loadscan", require: "loadscan/railtie")
      assert_includes out, %(-require "bootsnap/setup" # Speed up boot time by caching expensive operations.\n+require "loadscan/setup"\n)
      assert_includes out, "load_path_cache: false"
      assert out.end_with?("--dry-run: nothing written\n"), out

      out2, err, status = install(dir)
      assert_equal [0, ""], [status, err]
      assert_equal out.sub("--dry-run: nothing written", "changed Gemfile, config/boot.rb; now run `bundle install`"), out2
      after = files(dir)
      assert_equal <<~RUBY, after["config/boot.rb"]
        ENV['BUNDLE_GEMFILE'] ||= File.expand_path('../Gemfile', __dir__)

        require "bundler/setup" # Set up gems listed in the Gemfile.
        require "loadscan/setup"
        require "bootsnap" # its compile cache only: loadscan answers require
        Bootsnap.setup(cache_dir: File.expand_path("../tmp/cache", __dir__), load_path_cache: false,
                       compile_cache_iseq: true, compile_cache_yaml: true)
      RUBY
      assert_equal %(#{GEMFILE}gem "loadscan", require: "loadscan/railtie" # a load-path cache for require\n), after["Gemfile"]

      assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", "", 0], install(dir)
      assert_equal after, files(dir)
    end
  end

  def test_plain_app_without_bootsnap_and_a_gemfile_that_has_loadscan
    boot = %(require 'bundler/setup'\nrequire "./lib/app"\n)
    with_files([["Gemfile", %(gem 'loadscan', require: false)], ["config/boot.rb", boot]]) do |dir|
      out, err, status = install(dir)
      assert_equal [0, ""], [status, err], out
      assert_equal({ "Gemfile" => %(gem 'loadscan', require: false), "config/boot.rb" => %(require 'bundler/setup'\nrequire "loadscan/setup"\nrequire "./lib/app"\n) },
                   files(dir))
    end
    with_files([["Gemfile", %(gem "rack")], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal %(gem "rack"\ngem "loadscan", require: false # a load-path cache for require\n), files(dir)["Gemfile"]
    end
  end

  def test_bootsnap_already_without_its_load_path_cache_is_kept
    boot = %(require "bundler/setup"\nrequire "bootsnap"\nBootsnap.setup(cache_dir: "tmp/cache",\n  load_path_cache: false)\n)
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", boot]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal boot.sub(%(setup"\n), %(setup"\nrequire "loadscan/setup"\n)), files(dir)["config/boot.rb"]
    end
  end

  # Each: what config/boot.rb holds, and what the refusal names. Nothing is written.
  REFUSED = [
    [%(require "rubygems"\n), /expected one top-level `require "bundler\/setup"` line, found none/],
    [%(if ENV["X"]\n  require "bundler/setup"\nend\n), /found line 2: require "bundler\/setup"/],
    [%(require "bundler/setup"\nrequire "bundler/setup"\n), /found line 1: .*; line 2: /],
    [%(require "bundler/setup"\nrequire "bootsnap/setup" if ENV["BOOTSNAP"]\n), /expected `require "bootsnap\/setup"`.*line 2/],
    [%(require "bundler/setup"\nrequire "bootsnap"\nBootsnap.setup(cache_dir: "tmp/cache")\n), /expected `require "bootsnap\/setup"`/],
  ].freeze

  def test_refuses_a_boot_rb_it_does_not_understand_and_writes_nothing
    REFUSED.each do |boot, message|
      with_files([["Gemfile", GEMFILE], ["config/boot.rb", boot]]) do |dir|
        before = files(dir)
        out, err, status = install(dir)
        assert_equal ["", 1], [out, status], boot
        assert_match(/\Aloadscan install: config\/boot\.rb is not a form loadscan install edits: /, err)
        assert_match message, err
        assert_includes err, "add the lines by hand"
        assert_equal before, files(dir), boot
      end
    end
  end

  def test_an_app_it_cannot_write_is_named_and_left_as_it_was
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT]]) do |dir|
      File.chmod(0o755, dir) # readable, not writable, by nobody
      run = run_ruby(file: EXE, args: ["install"], env: { "BUNDLE_GEMFILE" => nil }, chdir: dir, as_nobody: true)
      assert_equal [1, ""], [run.status.exitstatus, run.stdout]
      assert_match(/\Aloadscan install: Permission denied .*#{Regexp.escape(dir)}\/Gemfile/, run.stderr)
      assert_equal({ "Gemfile" => GEMFILE, "config/boot.rb" => RAILS_BOOT }, files(dir))
    end
  end

  def test_refuses_outside_an_app
    with_files([["Gemfile", GEMFILE]]) do |dir|
      assert_equal ["", "loadscan install: no config/boot.rb in #{dir}: run `loadscan install` in the app's directory\n", 1],
                   install(dir)
      assert_equal GEMFILE, File.read(File.join(dir, "Gemfile"))
    end
  end
end
