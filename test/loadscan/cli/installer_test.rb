# frozen_string_literal: true

require_relative "../../test_helper"
require_relative "../../support/installer_run"
require_relative "../../../lib/loadscan/cli/installer"

# `loadscan install` (exe/loadscan in a real process) on apps' Gemfile, config/boot.rb and
# Dockerfile: the edits, the diff it shows, --dry-run, a second run, and the files it refuses to
# edit. test/loadscan/cli/installer/app_file_test.rb checks how it writes them (links, owners, modes,
# line endings, interrupts); test/integration/install_test.rb boots a real Rails app after it.
class InstallerTest < Minitest::Test
  include Loadscan::TestSupport::InstallerRun

  GEMFILE = %(source "https://rubygems.org"\ngem "rails"\ngem "bootsnap", require: false\n)
  # Rails 8's config/boot.rb (Rails 5.2 to 7 have single quotes on the first line).
  RAILS_BOOT = <<~RUBY
    ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)

    require "bundler/setup" # Set up gems listed in the Gemfile.
    require "bootsnap/setup" # Speed up boot time by caching expensive operations.
  RUBY
  # What install wrote before Bootsnap's line until issue 34 (loadscan/setup decides now): taken out.
  OLD_NO_LOAD_PATH_CACHE = %(ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"] ||= "1" # loadscan answers require; Bootsnap keeps its compile cache\n)
  LOADSCAN_LINE = %(gem "loadscan", require: false # a load-path cache for require\n)
  FIRST_LINE = Loadscan::Installer::Boot::FIRST_LINE
  CHANGED = "config/loadscan_boot.rb, config/boot.rb"

  # `boot` with the first line install puts before its `require "bundler/setup"` (in its line endings).
  def first(boot)
    eol = boot[/\r?\n/] || "\n"
    boot.sub(/^(?=require[ (]["']bundler\/setup)/) { "#{FIRST_LINE}#{eol}" }
  end

  def test_rails_app_with_bootsnap_dry_run_then_install_then_nothing
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT], ["config/application.rb", ""]]) do |dir|
      before = files(dir)
      out, err, status = install(dir, "--dry-run")
      assert_equal [0, ""], [status, err]
      assert_equal before, files(dir), "--dry-run wrote"
      assert_includes out, %(+gem "loadscan", require: "loadscan/railtie")
      assert_includes out, %( require "bundler/setup" # Set up gems listed in the Gemfile.\n+require "loadscan/setup"\n require "bootsnap/setup")
      assert_includes out, %(\n require "bootsnap/setup" # Speed up boot time by caching expensive operations.\n)
      assert out.end_with?("--dry-run: nothing written\n"), out

      out2, err, status = install(dir)
      assert_equal [0, ""], [status, err]
      assert_equal out.sub("--dry-run: nothing written", "changed Gemfile, #{CHANGED}; now run `bundle install`"), out2
      after = files(dir)
      assert_equal first(RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))), after["config/boot.rb"]
      assert_equal %(#{GEMFILE}gem "loadscan", require: "loadscan/railtie" # a load-path cache for require\n), after["Gemfile"]
      assert_equal File.read(Loadscan::Installer::BOOTSTRAP), File.read(File.join(dir, "config", "loadscan_boot.rb"))

      assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", "", 0], install(dir)
      assert_equal after, files(dir)
    end
  end

  def test_plain_app_without_bootsnap_and_a_gemfile_that_has_loadscan
    boot = %(require 'bundler/setup'\nrequire "./lib/app"\n)
    with_files([["Gemfile", %(gem 'loadscan', require: false)], ["config/boot.rb", boot]]) do |dir|
      out, err, status = install(dir)
      assert_equal [0, ""], [status, err], out
      assert_equal({ "Gemfile" => %(gem 'loadscan', require: false), "config/boot.rb" => first(%(require 'bundler/setup'\nrequire "loadscan/setup"\nrequire "./lib/app"\n)) },
                   files(dir))
    end
    with_files([["Gemfile", %(gem "rack")], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal %(gem "rack"\n#{LOADSCAN_LINE}), files(dir)["Gemfile"]
    end
  end

  # Where the Gemfile names loadscan for every boot (nothing added), and where it does not name
  # it at all (a commented line, a string, another gem): the line added.
  EVERY_BOOT = [%(gem "loadscan", path: "../loadscan"\n), %(gem("loadscan", "~> 0.1", require: "loadscan/railtie")\n),
                %(source "https://gems.example" do\n  gem "loadscan"\nend\n), %(group :default do\n  gem "loadscan"\nend\n),
                %(gem "loadscan", group: [:default, :test]\n), %(gem "loadscan", :require => false\n)].freeze
  NONE = [%(# gem "loadscan"\n), %(gem "loadscan-extra"\n), %(puts "gem 'loadscan'"\n), %(=begin\ngem "loadscan"\n=end\n)].freeze

  def test_a_gemfile_naming_loadscan_for_every_boot_is_kept_and_one_without_gets_the_line
    (EVERY_BOOT + NONE).each do |gemfile|
      with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
        out, err, status = install(dir)
        assert_equal [0, ""], [status, err], gemfile
        expected = EVERY_BOOT.include?(gemfile) ? gemfile : gemfile + LOADSCAN_LINE
        assert_equal expected, files(dir)["Gemfile"], gemfile
        assert_includes out, "changed #{EVERY_BOOT.include?(gemfile) ? CHANGED : "Gemfile, #{CHANGED}"}"
      end
    end
  end

  # Issue 29 (b): loadscan in a group (or for some platforms, or behind a condition) is not in
  # the bundle of every boot; `require "loadscan/setup"` in config/boot.rb would raise LoadError
  # in the others (BUNDLE_WITHOUT=development). Each Gemfile, and what the refusal names.
  SOME_BOOTS = [
    [%(group :development do\n  gem "loadscan"\nend\n), "line 2 (gem \"loadscan\"), inside `group :development do`"],
    [%(group :development, :test do\n  gem "loadscan", require: false\nend\n), "inside `group :development, :test do`"],
    [%(gem "loadscan", group: :development\n), "line 1 (gem \"loadscan\", group: :development), with `group:`"],
    [%(gem "loadscan", :groups => [:development, :test]\n), "with `groups:`"],
    [%(platforms :mri do\n  gem "loadscan"\nend\n), "inside `platforms :mri do`"],
    [%(gem "loadscan", platforms: :mri\n), "with `platforms:`"],
    [%(gem "loadscan", install_if: -> { RUBY_PLATFORM.include?("linux") }\n), "with `install_if:`"],
    [%(if ENV["FAST_BOOT"]\n  gem "loadscan"\nend\n), "line 2 (gem \"loadscan\"), inside code loadscan install does not read (line 1)"],
    [%(gem "loadscan", **OPTIONS\n), "with options loadscan install does not read"],
    [%(group :test do\n  %w[a].each { gem "loadscan" }\nend\n), "inside `group :test do`"],
  ].freeze

  def test_refuses_a_gemfile_that_names_loadscan_only_for_some_boots
    SOME_BOOTS.each do |gemfile, where|
      with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
        before = files(dir)
        out, err, status = install(dir)
        assert_equal ["", 1], [out, status], gemfile
        assert_match(/\Aloadscan install: Gemfile names loadscan only for some boots: /, err)
        assert_includes err, where, gemfile
        assert_includes err, "would raise LoadError where the bundle lacks it (BUNDLE_WITHOUT"
        assert_equal before, files(dir), gemfile
      end
    end
  end

  # Issue 34 (7): files `eval_gemfile` names are read through, relative to the file naming
  # them (a `gem "loadscan"` there is loadscan's line); each: the Gemfile, the files it
  # evaluates, and whether install adds the line.
  EVALUATED = [
    [%(eval_gemfile "Gemfile.common"\n), { "Gemfile.common" => %(gem "loadscan"\n) }, false],
    [%(eval_gemfile File.expand_path("gemfiles/base.rb", __dir__)\n),
     { "gemfiles/base.rb" => %(eval_gemfile "tools.rb"\n), "gemfiles/tools.rb" => %(gem "loadscan", require: false\n) }, false],
    [%(source "https://rubygems.org"\neval_gemfile "Gemfile.common"\n), { "Gemfile.common" => %(gem "rack"\n) }, true],
    [%(eval_gemfile "Gemfile.local" if File.exist?("Gemfile.local")\n), { "Gemfile.local" => %(gem "pry"\n) }, true],
  ].freeze

  def test_a_gemfile_evaluating_others_is_read_through
    EVALUATED.each do |gemfile, others, added|
      with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)], *others.to_a]) do |dir|
        out, err, status = install(dir)
        assert_equal [0, ""], [status, err], gemfile
        assert_equal added ? gemfile + LOADSCAN_LINE : gemfile, files(dir)["Gemfile"], gemfile
        assert_includes out, "changed #{added ? "Gemfile, #{CHANGED}" : CHANGED}", gemfile
        others.each { |rel, text| assert_equal text, File.read(File.join(dir, rel)), "#{rel} is never written" }
      end
    end
  end

  # Gemfiles whose declarations install cannot see, refused naming the line (nothing written);
  # and one whose evaluated file names loadscan only for some boots.
  UNSEEN = [
    [%(eval_gemfile ENV.fetch("SHARED_GEMFILE")\n), {}, /line 1 .* through `eval_gemfile` of a path that is not a string literal/],
    [%(eval_gemfile "a.rb"\n), { "a.rb" => %(eval_gemfile "b.rb"\n), "b.rb" => %(eval_gemfile "a.rb"\n) }, /b.rb line 1 \(eval_gemfile "a.rb"\) .*a cycle/],
    [%(eval_gemfile "fifo"\n), { "fifo" => :fifo }, /which is not a regular file \(fifo\)/],
    [%(instance_eval(File.read("Gemfile.shared"))\n), { "Gemfile.shared" => %(gem "loadscan"\n) }, /line 1 \(instance_eval\(File.read\("Gemfile.shared"\)\)\) declares gems through `instance_eval`/],
    [%(gem "rack"\n%w[loadscan pry].each { |g| gem g }\n), {}, /line 2 \(%w\[loadscan pry\].each \{ \|g\| gem g \}\) declares gems through `gem`/],
    [%(group :test do\n  send(:gem, "loadscan")\nend\n), {}, /line 2 .* through `send`/],
  ].freeze

  def test_refuses_a_gemfile_declaring_gems_it_cannot_read
    UNSEEN.each do |gemfile, others, message|
      with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)], *others.reject { |_, t| t == :fifo }]) do |dir|
        others.each { |rel, t| system("mkfifo", File.join(dir, rel), exception: true) if t == :fifo }
        before = files(dir)
        out, err, status = install(dir)
        assert_equal ["", 1], [out, status], gemfile
        assert_match message, err, gemfile
        assert_includes err, "cannot tell whether every boot's bundle has loadscan; add a top-level `gem \"loadscan\"` line by hand"
        assert_equal before, files(dir), gemfile
      end
    end
    with_files([["Gemfile", %(group :development do\n  eval_gemfile "dev.rb"\nend\n)], ["dev.rb", %(gem "rack"\ngem "loadscan"\n)],
                ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
      out, err, status = install(dir)
      assert_equal ["", 1], [out, status]
      assert_includes err, "Gemfile names loadscan only for some boots: dev.rb line 2 (gem \"loadscan\"), inside `group :development do`"
    end
  end

  # Issue 47 (8): a Gemfile Bundler reads is read: an `eval_gemfile` of a file that does not
  # exist, behind a guard (`if File.exist?`), in each form of the path; Bundler's own Dsl reads
  # each Gemfile first. One naming a missing file unguarded fails in Bundler too: refused, saying so.
  GUARDED = [
    %(source "https://rubygems.org"\ngem "rack"\neval_gemfile "Gemfile.local" if File.exist?("Gemfile.local")\n),
    %(gem "rack"\neval_gemfile File.expand_path("Gemfile.local", __dir__) if File.exist?(File.expand_path("Gemfile.local", __dir__))\n),
    %(gem "rack"\nif File.exist?(File.join(__dir__, "Gemfile.local"))\n  eval_gemfile File.join(__dir__, "Gemfile.local")\nend\n),
    %(gem "rack"\nunless ENV["CI"]\n  eval_gemfile "Gemfile.local" if File.file?("Gemfile.local")\nend\n),
  ].freeze

  def test_a_guarded_eval_gemfile_of_no_file_is_read_as_bundler_reads_it
    bundler = ->(dir) { run_ruby(%(require "bundler"\nBundler::Dsl.new.eval_gemfile("Gemfile")\n), loadscan: false, chdir: dir) }
    GUARDED.each do |gemfile|
      with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
        assert bundler.(dir).success?, "Bundler reads it: #{gemfile}"
        out, err, status = install(dir)
        assert_equal [0, ""], [status, err], gemfile
        assert_equal gemfile + LOADSCAN_LINE, files(dir)["Gemfile"], gemfile
        assert_includes out, "changed Gemfile, "
      end
    end
    gemfile = %(source "https://rubygems.org"\neval_gemfile "missing.rb"\n)
    with_files([["Gemfile", gemfile], ["config/boot.rb", %(require "bundler/setup"\n)]]) do |dir|
      refute bundler.(dir).success?, "Bundler fails on it"
      before = files(dir)
      out, err, status = install(dir)
      assert_equal ["", 1], [out, status]
      assert_equal "loadscan install: Gemfile line 2 (eval_gemfile \"missing.rb\") names missing.rb, which does not exist: Bundler " \
                   "fails on it too; create it or guard the line (`if File.exist?(…)`), then run `loadscan install` again\n", err
      assert_equal before, files(dir)
    end
  end

  def test_bootsnap_already_without_its_load_path_cache_is_kept
    boot = %(require "bundler/setup"\nrequire "bootsnap"\nBootsnap.setup(cache_dir: "tmp/cache",\n  load_path_cache: false)\n)
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", boot]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal first(boot.sub(%(setup"\n), %(setup"\nrequire "loadscan/setup"\n))), files(dir)["config/boot.rb"]
    end
  end

  # Rails' `require "bootsnap/setup"` with the user's own Bootsnap settings before it: kept, and
  # the load-path cache turned off once (a variable the user already set that way: nothing added).
  def test_bootsnap_setup_keeps_the_users_bootsnap_settings
    settings = %(ENV["BOOTSNAP_CACHE_DIR"] ||= "/var/cache/app"\nENV['BOOTSNAP_READONLY'] = "1"\n)
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT.sub("\nrequire \"bundler", "\n#{settings}require \"bundler")]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal first(RAILS_BOOT.sub("\nrequire \"bundler", "\n#{settings}require \"bundler")
                                   .sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))), files(dir)["config/boot.rb"]
    end
    own = %(ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"] = "yes"\n)
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", own + RAILS_BOOT]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal first(own + RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))), files(dir)["config/boot.rb"]
    end
  end

  # Issue 34: loadscan/setup decides Bootsnap's load-path cache (off only where loadscan is
  # engaged), so an app an earlier install edited loses the line that turned it off on every
  # boot, once; the user's own setting of the variable stays.
  def test_the_line_turning_bootsnaps_cache_off_on_every_boot_is_taken_out
    edited = RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n#{OLD_NO_LOAD_PATH_CACHE}))
    gemfile = %(#{GEMFILE}gem "loadscan", require: "loadscan/railtie"\n)
    with_files([["Gemfile", gemfile], ["config/boot.rb", edited], ["config/application.rb", ""]]) do |dir|
      out, err, status = install(dir)
      assert_equal [0, ""], [status, err], out
      assert_includes out, %( require "loadscan/setup"\n-#{OLD_NO_LOAD_PATH_CACHE} require "bootsnap/setup")
      assert_equal({ "Gemfile" => gemfile, "config/boot.rb" => first(RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))) },
                   files(dir))
      assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", "", 0], install(dir)
    end
    # CRLF, and the old line last in a file that does not end with a newline.
    last = %(require "bundler/setup"\r\nrequire "loadscan/setup"\r\n#{OLD_NO_LOAD_PATH_CACHE.chomp})
    own = %(ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"] ||= "1"\n#{RAILS_BOOT})
    [[last, first(%(require "bundler/setup"\r\nrequire "loadscan/setup"\r\n))],
     [own, first(own.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n)))]].each do |boot, expected|
      with_files([["Gemfile", GEMFILE], ["config/boot.rb", boot]]) do |dir|
        assert_equal 0, install(dir).last
        assert_equal expected, files(dir)["config/boot.rb"]
      end
    end
  end

  # Issue 48: `require "loadscan/setup"` after `require "bootsnap/setup"` (loadscan answers
  # almost nothing there) is moved after Bundler's setup, its comment kept; an install from before
  # the first line gets it; a first line after Bundler's setup is moved before it.
  def test_an_existing_install_is_reordered_and_gets_the_first_line
    installed = first(RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n)))
    swapped = %(#{RAILS_BOOT}require "loadscan/setup"\n)
    before_first_line = RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))
    late = %(#{RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup"\n))}#{FIRST_LINE}\n)
    gemfile = %(#{GEMFILE}gem "loadscan", require: "loadscan/railtie"\n)
    [swapped, before_first_line, late].each do |boot|
      with_files([["Gemfile", gemfile], ["config/boot.rb", boot], ["config/application.rb", ""]]) do |dir|
        out, err, status = install(dir)
        assert_equal [0, ""], [status, err], out
        assert_equal installed, files(dir)["config/boot.rb"], boot
        assert_includes out, "changed #{CHANGED}\n"
        assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", "", 0], install(dir)
      end
    end
    with_files([["Gemfile", gemfile], ["config/boot.rb", %(#{RAILS_BOOT}require "loadscan/setup" # mine\n)]]) do |dir|
      assert_equal 0, install(dir).last
      assert_equal first(RAILS_BOOT.sub(%(Gemfile.\n), %(Gemfile.\nrequire "loadscan/setup" # mine\n))), files(dir)["config/boot.rb"]
    end
  end

  # `loadscan uninstall`: shows what it would take out and writes nothing; with --write puts every
  # file back byte for byte (the first line's file and the app's cache dir removed); then has
  # nothing to change.
  def test_uninstall_puts_the_app_back
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT], ["config/application.rb", ""], ["Dockerfile", DOCKERFILE]]) do |dir|
      before = files(dir)
      assert_equal 0, install(dir).last
      installed = files(dir)
      FileUtils.mkdir_p(File.join(dir, "tmp", "cache", "loadscan"))
      File.write(File.join(dir, "tmp", "cache", "loadscan", "loadscan.cache"), "x")
      out, err, status = uninstall(dir)
      assert_equal [0, ""], [status, err], out
      assert_equal installed, files(dir), "uninstall without --write wrote"
      assert File.exist?(File.join(dir, "config", "loadscan_boot.rb"))
      assert_includes out, %(-#{FIRST_LINE}\n require "bundler/setup")
      assert_includes out, "--- a/config/loadscan_boot.rb\n+++ /dev/null\n"
      assert_includes out, "nothing written: run `loadscan uninstall --write` to change config/boot.rb, config/loadscan_boot.rb, " \
                           "Gemfile, Dockerfile, tmp/cache/loadscan/"
      out, err, status = uninstall(dir, "--write")
      assert_equal [0, ""], [status, err], out
      assert_equal before, files(dir)
      refute File.exist?(File.join(dir, "config", "loadscan_boot.rb"))
      refute File.exist?(File.join(dir, "tmp", "cache", "loadscan"))
      assert_includes out, "changed config/boot.rb, config/loadscan_boot.rb, Gemfile, Dockerfile, tmp/cache/loadscan/; now run `bundle install`"
      assert_equal ["nothing to change: loadscan is not in Gemfile, config/boot.rb or the Dockerfile\n", "", 0], uninstall(dir, "--write")
    end
  end

  # The Gemfile's own loadscan lines go too (a `path:` one, in a group); one that shares its line
  # with other code, or a boot line of another form, is refused: nothing written.
  def test_uninstall_takes_out_the_users_own_lines_and_refuses_others
    gemfile = %(gem "rack"\ngroup :default do\n  gem "loadscan", path: "../loadscan" # mine\nend\n)
    boot = %(require "bundler/setup"\nrequire("loadscan/setup")\n)
    with_files([["Gemfile", gemfile], ["config/boot.rb", boot]]) do |dir|
      out, err, status = uninstall(dir, "--write")
      assert_equal [0, ""], [status, err], out
      assert_equal({ "Gemfile" => %(gem "rack"\ngroup :default do\nend\n), "config/boot.rb" => %(require "bundler/setup"\n) }, files(dir))
    end
    [[%(gem "rack"; gem "loadscan"\n), %(require "bundler/setup"\n), /Gemfile line 1 .* names loadscan with other code on its line/],
     [%(gem "loadscan"\n), %(require "bundler/setup"\nrequire "loadscan/setup" if ENV["X"]\n), /config\/boot\.rb is not a form .*found line 2/]]
      .each do |gemfile2, boot2, message|
        with_files([["Gemfile", gemfile2], ["config/boot.rb", boot2]]) do |dir|
          before = files(dir)
          out, err, status = uninstall(dir, "--write")
          assert_equal ["", 1], [out, status], err
          assert_match message, err
          assert_equal before, files(dir)
        end
      end
  end

  # Each: what config/boot.rb holds, and what the refusal names. Nothing is written.
  REFUSED = [
    [%(require "rubygems"\n), /expected one top-level `require "bundler\/setup"` line, found none/],
    [%(if ENV["X"]\n  require "bundler/setup"\nend\n), /found line 2: require "bundler\/setup"/],
    [%(require "bundler/setup"\nrequire "bundler/setup"\n), /found line 1: .*; line 2: /],
    [%(require "bundler/setup"; require "x"\n), /found line 1: require "bundler\/setup"; require "x"/],
    [%(require "bundler/setup"\nrequire "bootsnap/setup" if ENV["BOOTSNAP"]\n), /expected `require "bootsnap\/setup"`.*line 2/],
    [%(require "bundler/setup"\nrequire "bootsnap"\nBootsnap.setup(cache_dir: "tmp/cache")\n), /expected `require "bootsnap\/setup"`.*line 2: require "bootsnap"; line 3: Bootsnap.setup/],
    [%(require "bootsnap/setup"\nrequire "bundler/setup"\n), /expected `require "bootsnap\/setup"` after `require "bundler\/setup"`, found line 1/],
    [%(require "bundler/setup"\nrequire "bootsnap/setup"\nrequire "loadscan/setup" if ENV["X"]\n), /expected `require "loadscan\/setup"` before `require "bootsnap\/setup"`, found line 3: /],
    [%(require "bundler/setup"\n#{FIRST_LINE}\n#{FIRST_LINE}\n), /expected at most one `load File.expand_path.*, found line 2: .*; line 3: /],
    [%(require "bundler/setup"\nload File.expand_path("loadscan_boot.rb", __dir__) if x\n), /expected at most one `load File.expand_path.*, found line 2: /],
    [%(require "bundler/setup"\nrequire "bootsnap/setup"\nBootsnap.instrumentation = ->(*) {}\n), /found line 2: .*; line 3: Bootsnap.instrumentation/],
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

  def test_refuses_files_that_do_not_parse
    [["Gemfile", %(gem "rack"\nend\n), %(require "bundler/setup"\n)], ["config/boot.rb", GEMFILE, %(require "bundler/setup"\nif x\n)]].each do |bad, gemfile, boot|
      with_files([["Gemfile", gemfile], ["config/boot.rb", boot]]) do |dir|
        before = files(dir)
        out, err, status = install(dir)
        assert_equal ["", 1], [out, status]
        assert_match(/\Aloadscan install: #{Regexp.escape(bad)} does not parse \(.+\): fix it, then run `loadscan install` again\n\z/, err)
        assert_equal before, files(dir)
      end
    end
  end

  def test_refuses_outside_an_app
    with_files([["Gemfile", GEMFILE]]) do |dir|
      assert_equal ["", "loadscan install: no config/boot.rb in #{dir}: run `loadscan install` in the app's directory\n", 1],
                   install(dir)
      assert_equal GEMFILE, File.read(File.join(dir, "Gemfile"))
    end
  end

  # Rails 8's Dockerfile, its stages and the steps around Bootsnap's (test/integration/
  # install_test.rb builds the one `rails new` generates).
  DOCKERFILE = <<~DOCKER
    # syntax=docker/dockerfile:1
    ARG RUBY_VERSION=3.4.5
    FROM docker.io/library/ruby:$RUBY_VERSION-slim AS base
    WORKDIR /rails
    ENV RAILS_ENV="production" \\
        BUNDLE_WITHOUT="development"

    FROM base AS build
    RUN bundle install && \\
        # -j 1 disable parallel compilation to avoid a QEMU bug: https://github.com/rails/bootsnap/issues/495
        bundle exec bootsnap precompile -j 1 --gemfile
    COPY . .
    RUN bundle exec bootsnap precompile -j 1 app/ lib/
    RUN SECRET_KEY_BASE_DUMMY=1 ./bin/rails assets:precompile

    FROM base
    USER 1000:1000
    COPY --chown=rails:rails --from=build /rails /rails
    CMD ["./bin/rails", "server"]
  DOCKER
  BUILD_LINES = %(\n# Write loadscan's load-path cache (tmp/cache/loadscan); the image's boots use it read-only.\nRUN bundle exec loadscan build\n)
  RUNTIME_LINES = %(\n# loadscan: use the cache `loadscan build` wrote, never write it, and check it by listing\n) +
                  %(# (a container's directories are new inodes and devices, not the ones the build saw).\n) +
                  %(ENV LOADSCAN_READONLY="1" LOADSCAN_VALIDATE="listing"\n)

  def test_a_rails_dockerfile_gets_loadscan_build_beside_bootsnaps_and_its_boots_settings
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT], ["Dockerfile", DOCKERFILE]]) do |dir|
      out, err, status = install(dir)
      assert_equal [0, ""], [status, err]
      assert_includes out, "changed Gemfile, #{CHANGED}, Dockerfile; now run `bundle install`"
      expected = DOCKERFILE.sub(%(app/ lib/\n), %(app/ lib/\n#{BUILD_LINES})).sub(%(FROM base\n), %(FROM base\n#{RUNTIME_LINES}))
      assert_equal expected, files(dir)["Dockerfile"]
      assert_equal ["nothing to change: loadscan is set up in Gemfile and config/boot.rb\n", "", 0], install(dir)
    end
  end

  # Dockerfiles of another shape are left alone, with a note, and the rest is installed.
  OTHER_DOCKERFILES = [
    [%(FROM ruby:3.4\nCOPY . .\nRUN bundle install\n), "no single `RUN bundle exec bootsnap precompile … app/ lib/` step"],
    [DOCKERFILE.sub("COPY . .\n", "COPY . .\nRUN bundle exec bootsnap precompile config/\n"), "no single"],
    [DOCKERFILE.sub("COPY . .\n", "COPY <<EOF /etc/x\nRUN bundle exec bootsnap precompile app/\nEOF\n"), "it has a heredoc"],
  ].freeze

  def test_a_dockerfile_of_another_shape_is_left_alone_with_a_note
    OTHER_DOCKERFILES.each do |dockerfile, why|
      with_files([["Gemfile", GEMFILE], ["config/boot.rb", RAILS_BOOT], ["Dockerfile", dockerfile]]) do |dir|
        out, err, status = install(dir)
        assert_equal [0, ""], [status, err]
        assert_match(/^Dockerfile left as it is \(#{Regexp.escape(why)}.*\): add `RUN bundle exec loadscan build`/, out)
        assert_includes out, "changed Gemfile, #{CHANGED};"
        assert_equal dockerfile, files(dir)["Dockerfile"]
      end
    end
  end
end
