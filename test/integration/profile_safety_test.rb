# frozen_string_literal: true

require_relative "../test_helper"
require "json"

# The boot profile ends cleanly whatever it meets (issue 47): any locale and feature name, a
# signal to `loadscan profile`, a `Loadscan.profile` inside a profiled boot, template markers in
# the arguments, a read-only app, a command that does not exist, a LOADSCAN_PROFILE that cannot
# be the profile's file, and programs the profiled one starts. The program's own exit status is
# never changed, and a failure is one line, never a backtrace.
class ProfileSafetyTest < Minitest::Test
  EXE = Loadscan::TestSupport::EXE
  LIB = Loadscan::TestSupport::LIB
  BACKTRACE = /^\s+from |\.rb:\d+:in /

  # A program run with `-I lib/` of this checkout (loadscan/setup), as a boot loads it.
  def ruby_with_loadscan(code, dir:, env: {}, args: [])
    File.write(File.join(dir, "main.rb"), code)
    run_ruby(command: [RbConfig.ruby, "-I", LIB, "main.rb", *args], chdir: dir,
             env: { "LOADSCAN_CACHE_DIR" => File.join(dir, "cache"), "LOADSCAN_PROFILE" => nil }.merge(env))
  end

  def profile_command(*args, dir:, env: {}, timeout: 60, &block)
    run_ruby(file: EXE, args: ["profile", *args], chdir: dir, timeout: timeout,
             env: { "LOADSCAN_CACHE_DIR" => File.join(dir, "cache"), "BUNDLE_GEMFILE" => nil, "LOADSCAN_PROFILE" => nil }.merge(env), &block)
  end

  def one_line_no_backtrace(run)
    assert_equal 1, run.stderr.lines.size, run.stderr
    refute_match BACKTRACE, run.stderr
  end

  # LC_ALL=C, a feature named in UTF-8 (lib/café.rb): the page is written (UTF-8), and the
  # program's exit status stays its own; `loadscan profile` reads its JSON back.
  def test_any_locale_and_a_non_ascii_feature_name
    with_files([["lib/café.rb", "$cafe = 1\n"], ["boot.rb", %(require "café"\n)]]) do |dir|
      %w[p.html p.json].each do |out|
        run = ruby_with_loadscan(%(require "loadscan/setup"\n$LOAD_PATH.unshift(File.join(__dir__, "lib"))\nrequire "café"\nexit 3\n),
                                 dir: dir, env: { "LC_ALL" => "C", "LANG" => nil, "LOADSCAN_PROFILE" => out })
        assert_equal 3, run.status.exitstatus, run.stderr
        refute_match BACKTRACE, run.stderr
        text = File.binread(File.join(dir, out)).force_encoding(Encoding::UTF_8)
        assert text.valid_encoding?
        assert_includes text, "café"
      end

      run = profile_command("--output", File.join(dir, "boot"), "--", RbConfig.ruby, "-Ilib", "boot.rb",
                            dir: dir, env: { "LC_ALL" => "C", "LANG" => nil })
      assert run.success?, run.stderr
      assert_includes run.stdout.b, "café".b
      assert_includes File.read(File.join(dir, "boot.html"), encoding: "UTF-8"), "café"
    end
  end

  # A signal to `loadscan profile` (Ctrl-C, a cancelled CI job, `timeout`) goes to the boot,
  # which handles it (here: writes which one, then dies of it); the command waits for it and
  # exits as a shell says a signal ended it, with no backtrace and nothing left running.
  CHILD = <<~'RUBY'
    sig = ARGV[0]
    Signal.trap(sig) do
      File.write("got", sig)
      Signal.trap(sig, "SYSTEM_DEFAULT")
      Process.kill(sig, Process.pid)
    end
    File.write("pid.tmp", Process.pid.to_s)
    File.rename("pid.tmp", "pid")
    sleep
  RUBY

  def test_signals_reach_the_boot_and_the_command_waits_for_it
    %w[INT TERM HUP].each do |sig|
      with_files([["child.rb", CHILD], ["tmp/.keep", ""]]) do |dir|
        child = left_running = nil
        run = profile_command("--", RbConfig.ruby, "child.rb", sig, dir: dir, timeout: nil) do |pid|
          # Bounded waits only by a limit no run reaches: the boot is up (its handler set), then
          # the command is gone; a boot still running then would hold its output open: ended.
          wait_until { File.exist?(File.join(dir, "pid")) }
          child = File.read(File.join(dir, "pid")).to_i
          Process.kill(sig, pid)
          wait_until { !alive?(pid) }
          left_running = alive?(child)
          Process.kill(:KILL, child) if left_running
        end
        assert_equal false, left_running, "#{sig}: the boot is not left running"
        assert_equal 128 + Signal.list[sig], run.status.exitstatus, "#{sig}: #{run.status.inspect} #{run.stderr}"
        assert_equal sig, File.read(File.join(dir, "got")), "the boot got #{sig}"
        refute_match BACKTRACE, run.stderr
      end
    end
  end

  def wait_until(limit = 300)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + limit
    sleep 0.01 until yield || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
  end

  # Whether `pid` runs (a zombie of the command's, which no one waits for once it is gone: no).
  def alive?(pid)
    Process.kill(0, pid)
    !File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
  rescue Errno::ESRCH, Errno::ENOENT
    false
  end

  # `Loadscan.profile { }` inside a profiled boot (LOADSCAN_PROFILE, `loadscan profile`): the
  # block's entries are in the boot's profile, and the tree it returns has them.
  NESTED = <<~RUBY
    require "loadscan/setup"
    $LOAD_PATH.unshift(File.join(__dir__, "lib"))
    tree = Loadscan.profile(name: "inner") { require "inner" }
    File.write("inner.txt", tree.entries.map(&:label).join(","))
  RUBY

  def test_loadscan_profile_inside_a_profiled_boot
    with_files([["lib/inner.rb", "require 'deeper'\n"], ["lib/deeper.rb", ""], ["tmp/.keep", ""]]) do |dir|
      run = ruby_with_loadscan(NESTED, dir: dir, env: { "LOADSCAN_PROFILE" => "outer.json" })
      assert run.success?, run.stderr
      assert_equal "inner,inner,deeper", File.read(File.join(dir, "inner.txt"))
      outer = JSON.parse(File.read(File.join(dir, "outer.json")))
      assert_equal %w[inner [app]], outer["shared"]["frames"].map { |f| f["name"] }.grep(/\Ainner /).first.split
      File.delete(File.join(dir, "inner.txt"))

      run = profile_command("--", RbConfig.ruby, "-I", LIB, "main.rb", dir: dir)
      assert run.success?, run.stderr
      assert_equal "inner,inner,deeper", File.read(File.join(dir, "inner.txt"))
      frames = JSON.parse(File.read(File.join(dir, "tmp", "loadscan-profile.json")))["shared"]["frames"].map { |f| f["name"] }
      assert_includes frames, "deeper [app]"
    end
  end

  # Arguments holding the page's template markers are text in its title, and its data is whole.
  def test_template_markers_in_arguments_leave_the_page_whole
    with_files([["tmp/.keep", ""]]) do |dir|
      run = profile_command("--", RbConfig.ruby, "-e", "nil", "{{DATA}}", "{{TITLE}}", "</script>", dir: dir)
      assert run.success?, run.stderr
      html = File.read(File.join(dir, "tmp", "loadscan-profile.html"))
      title = html[%r{<title>(.*?)</title>}m, 1]
      assert_includes title, "{{DATA}} {{TITLE}} &lt;/script&gt;"
      data = html[%r{<script type="application/json" id="profile-data">(.*?)</script>}m, 1]
      assert_equal File.read(File.join(dir, "tmp", "loadscan-profile.json")).gsub("</", "<\\/"), data
      assert_match(/\{\{DATA\}\} \{\{TITLE\}\} <\/script>\z/, JSON.parse(data)["loadscan"]["name"])
    end
  end

  # A read-only app (a read-only mount): one line before the boot runs, exit 1.
  def test_a_read_only_app
    with_files([["tmp/.keep", ""]]) do |dir|
      cmd = [RbConfig.ruby, EXE, "profile", "--", RbConfig.ruby, "-e", "File.write('ran', '')"]
      run = run_ruby(command: read_only_mount(dir, cmd), chdir: dir, env: { "BUNDLE_GEMFILE" => nil })
      assert_equal 1, run.status.exitstatus, run.stderr
      one_line_no_backtrace(run)
      assert_match(%r{\Aloadscan profile: cannot write the profile in #{Regexp.escape(dir)}/tmp: Read-only file system}, run.stderr)
      refute File.exist?(File.join(dir, "ran")), "the boot does not run"
    end
  end

  # `mount --bind -o ro dir dir` in a mount namespace of its own, then `cmd` there.
  def read_only_mount(dir, cmd)
    probe = system("unshare", "-m", "sh", "-c", 'mount --bind -o ro "$1" "$1"', "sh", dir, out: File::NULL, err: File::NULL)
    skip "no mount namespace here (unshare -m needs root)" unless probe
    ["unshare", "-m", "sh", "-c", 'd=$1; shift; mount --bind -o ro "$d" "$d" && exec "$@"', "sh", dir, *cmd]
  end

  # A command that does not exist or cannot run: one line, a shell's status.
  def test_a_command_that_cannot_run
    with_files([["tmp/.keep", ""], ["bin/plain", "#!/bin/sh\n"]]) do |dir|
      run = profile_command("--", "bin/nosuch", dir: dir)
      assert_equal 127, run.status.exitstatus, run.stderr
      one_line_no_backtrace(run)
      assert_equal "loadscan profile: cannot run `bin/nosuch`: No such file or directory\n", run.stderr
      File.chmod(0o644, File.join(dir, "bin/plain"))
      run = profile_command("--", "bin/plain", dir: dir)
      assert_equal 126, run.status.exitstatus, run.stderr
      one_line_no_backtrace(run)
    end
  end

  # A LOADSCAN_PROFILE that cannot be the profile's file: one warning when loadscan loads, before
  # the boot goes on (unprofiled), and nothing written; the program's status is its own.
  def test_a_value_that_cannot_be_the_file_is_refused_at_start
    with_files([["adir/.keep", ""]]) do |dir|
      { "1" => "not a file to write the profile to", "adir" => "#{dir}/adir is a directory",
        "adir.json/" => "#{dir}/adir.json is a directory",
        "nodir/p.json" => "the directory #{dir}/nodir does not exist",
        "fifo.json" => "#{dir}/fifo.json is not a regular file (fifo)" }.each do |value, why|
        FileUtils.mkdir_p(File.join(dir, "adir.json"))
        File.mkfifo(File.join(dir, "fifo.json")) unless File.exist?(File.join(dir, "fifo.json"))
        run = ruby_with_loadscan(%(require "loadscan/setup"\nwarn "booting"\nexit 4\n), dir: dir, env: { "LOADSCAN_PROFILE" => value })
        assert_equal 4, run.status.exitstatus, run.stderr
        assert_equal 2, run.stderr.lines.size, run.stderr
        assert_match(/\Aloadscan: LOADSCAN_PROFILE=#{Regexp.escape(value)}: .*#{Regexp.escape(why)}.*; the boot goes on unprofiled\nbooting\n\z/, run.stderr)
        assert_equal %w[adir adir.json fifo.json main.rb], Dir.children(dir).sort - %w[cache], value
      end
    end
  end

  # The file cannot be written at exit (its directory went away): the summary is still printed,
  # then one warning; the status is the program's.
  def test_the_summary_is_kept_when_the_file_cannot_be_written
    with_files([["out/.keep", ""]]) do |dir|
      run = ruby_with_loadscan(%(require "loadscan/setup"\nrequire "fileutils"\nFileUtils.rm_rf(File.join(__dir__, "out"))\n),
                               dir: dir, env: { "LOADSCAN_PROFILE" => "out/p.json" })
      assert run.success?, run.stderr
      assert_match(/\Aboot: [\d.]+ ms \(main\.rb\)/, run.stderr)
      assert_match(%r{\nloadscan: could not write the profile to #{Regexp.escape(dir)}/out/p\.json: No such file or directory\n\z}, run.stderr)
    end
  end

  # LOADSCAN_PROFILE is the profiled process's: a program it starts (`system`) that loads
  # loadscan writes nothing (one summary, the parent's), one the program names a file for writes
  # that one, and a program it `exec`s (the same process) writes the profile.
  def test_programs_it_starts_do_not_write_the_same_file
    child = %(require "loadscan/setup"\nFile.write("child-ran", "")\n)
    with_files([["child.rb", child]]) do |dir|
      ruby = [RbConfig.ruby, "-I", LIB, "child.rb"].inspect
      run = ruby_with_loadscan(%(require "loadscan/setup"\nsystem(*#{ruby}, exception: true)\n), dir: dir,
                                                                                                  env: { "LOADSCAN_PROFILE" => "p.json" })
      assert run.success?, run.stderr
      assert File.exist?(File.join(dir, "child-ran"))
      assert_equal 1, run.stderr.scan("profile written to").size, run.stderr
      assert_equal "main.rb", JSON.parse(File.read(File.join(dir, "p.json")))["loadscan"]["name"]

      named = %(require "loadscan/setup"\nENV["LOADSCAN_PROFILE"] = "child.json"\nsystem(*#{ruby}, exception: true)\n)
      run = ruby_with_loadscan(named, dir: dir, env: { "LOADSCAN_PROFILE" => "p.json" })
      assert run.success?, run.stderr
      assert_equal "child.rb", JSON.parse(File.read(File.join(dir, "child.json")))["loadscan"]["name"]
      assert_equal "main.rb", JSON.parse(File.read(File.join(dir, "p.json")))["loadscan"]["name"]

      File.delete(File.join(dir, "p.json"))
      run = ruby_with_loadscan(%(require "loadscan/setup"\nexec(*#{ruby})\n), dir: dir, env: { "LOADSCAN_PROFILE" => "p.json" })
      assert run.success?, run.stderr
      assert_equal "child.rb", JSON.parse(File.read(File.join(dir, "p.json")))["loadscan"]["name"]
    end
  end
end
