# frozen_string_literal: true

require_relative "../../../test_helper"
require_relative "../../../support/installer_run"
require_relative "../../../support/bundler_app"

# How `loadscan install` (exe/loadscan in a real process) writes the files it edits (issue 29,
# first defect): never a broken or lost file. A last line without a newline stays a line of its
# own (and the app then boots with loadscan set up); a symlink stays a link and its target is
# edited; mode, owner and line endings are kept; a failure or an interrupt leaves every file
# whole (old or new) and no temp file; no diff(1) is needed.
class InstallerAppFileTest < Minitest::Test
  include Loadscan::TestSupport::InstallerRun

  GEMFILE = %(source "https://rubygems.org"\ngem "rack"\n)
  BOOT = %(require "bundler/setup"\n)
  FIRST_LINE = %(load File.expand_path("loadscan_boot.rb", __dir__) # loadscan, set up before Bundler\n)
  NEW_BOOT = %(#{FIRST_LINE}require "bundler/setup"\nrequire "loadscan/setup"\n)
  # The file the first line loads, which install adds.
  BOOTSTRAP = "config/loadscan_boot.rb"
  NEW_GEMFILE = %(#{GEMFILE}gem "loadscan", require: false # a load-path cache for require\n).freeze

  def listing(dir) = Dir.glob("**/*", File::FNM_DOTMATCH, base: dir).sort

  def parses?(path) = run_ruby(command: [RbConfig.ruby, "-c", path]).success?

  # (a) `require "bundler/setup"` as the last line, without a newline: alone, and with Rails'
  # comment after it (a line glued on there would be part of the comment). The app then boots
  # through Bundler with loadscan engaged.
  def test_a_last_line_without_newline_stays_a_line_and_the_app_boots_with_loadscan
    ['require "bundler/setup"', 'require "bundler/setup" # Set up gems listed in the Gemfile.'].each do |last|
      with_files([["Gemfile", %(source "https://rubygems.org"\ngem "loadscan", path: #{Loadscan::TestSupport::ROOT.inspect}\n)],
                  ["config/boot.rb", %(ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)\n#{last})]]) do |app|
        out, err, status = install(app)
        assert_equal [0, ""], [status, err], out
        boot = File.join(app, "config", "boot.rb")
        assert_equal %(ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)\n#{FIRST_LINE}#{last}\nrequire "loadscan/setup"\n), File.read(boot)
        assert parses?(boot), "ruby -c #{boot}"
        Loadscan::TestSupport::BundlerApp.bundle_lock(app)
        run = run_ruby(%(require #{boot.inspect}\nreport("engaged" => Loadscan.engaged?)), env: Loadscan::TestSupport::BundlerApp.env(app))
        assert_equal({ "engaged" => true }, run.report, run.stderr)
      end
    end
  end

  # Issue 34 (7): loadscan declared through `eval_gemfile`: the Gemfile is left as it is (a
  # second `gem "loadscan"` made Bundler refuse every command), Bundler still locks it, and the
  # app boots with loadscan engaged.
  def test_an_app_declaring_loadscan_through_eval_gemfile_still_boots
    with_files([["Gemfile", %(source "https://rubygems.org"\neval_gemfile "gemfiles/tools.rb"\n)],
                ["gemfiles/tools.rb", %(gem "loadscan", path: #{Loadscan::TestSupport::ROOT.inspect}, require: false\n)],
                ["config/boot.rb", %(ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)\nrequire "bundler/setup"\n)]]) do |app|
      gemfile = File.read(File.join(app, "Gemfile"))
      out, err, status = install(app)
      assert_equal [0, ""], [status, err], out
      assert_equal gemfile, File.read(File.join(app, "Gemfile"))
      Loadscan::TestSupport::BundlerApp.bundle_lock(app)
      boot = File.join(app, "config", "boot.rb")
      run = run_ruby(%(require #{boot.inspect}\nreport("engaged" => Loadscan.engaged?)), env: Loadscan::TestSupport::BundlerApp.env(app))
      assert_equal({ "engaged" => true }, run.report, run.stderr)
    end
  end

  # (c) A symlinked Gemfile (relative, through a second link) and config/boot.rb (absolute):
  # the links stay, their targets are edited. A dangling one is refused.
  def test_symlinks_stay_links_and_their_targets_are_edited
    with_files([["shared/Gemfile", GEMFILE], ["shared/boot.rb", BOOT], ["shared/Gemfile.link", :symlink, "Gemfile"],
                ["app/Gemfile", :symlink, "../shared/Gemfile.link"]]) do |dir|
      app = File.join(dir, "app")
      FileUtils.mkdir_p(File.join(app, "config"))
      File.symlink(File.join(dir, "shared", "boot.rb"), File.join(app, "config", "boot.rb"))
      before = listing(dir)
      out, err, status = install(app)
      assert_equal [0, ""], [status, err], out
      assert_equal ["../shared/Gemfile.link", File.join(dir, "shared", "boot.rb")],
                   [File.readlink(File.join(app, "Gemfile")), File.readlink(File.join(app, "config", "boot.rb"))]
      assert_equal [NEW_GEMFILE, NEW_BOOT], [File.read(File.join(dir, "shared", "Gemfile")), File.read(File.join(dir, "shared", "boot.rb"))]
      assert File.symlink?(File.join(dir, "shared", "Gemfile.link"))
      assert_equal (before + ["app/#{BOOTSTRAP}"]).sort, listing(dir), "no file added or removed but the first line's"
    end
    with_files([["app/Gemfile", :symlink, "../nowhere"], ["app/config/boot.rb", BOOT]]) do |dir|
      assert_equal ["", "loadscan install: Gemfile is a symlink to ../nowhere, which does not resolve: fix the link first\n", 1],
                   install(File.join(dir, "app"))
      assert_equal BOOT, File.read(File.join(dir, "app", "config", "boot.rb"))
    end
  end

  # (d) With no diff(1) on PATH, --dry-run shows the diff and install writes, both exit 0.
  def test_no_diff_on_path_is_needed
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT], ["bin/timeout", :symlink, "/usr/bin/timeout"]]) do |app|
      env = { "PATH" => File.join(app, "bin") } # timeout(1) for run_ruby, no diff(1)
      out, err, status = install(app, "--dry-run", env: env)
      assert_equal [0, ""], [status, err]
      assert_includes out, %(--- a/config/boot.rb\n+++ b/config/boot.rb\n@@ -1 +1,3 @@\n+#{FIRST_LINE} require "bundler/setup"\n+require "loadscan/setup"\n)
      assert_equal [GEMFILE, BOOT], files(app).values
      out2, err, status = install(app, env: env)
      assert_equal [0, ""], [status, err]
      assert_equal out.sub("--dry-run: nothing written", "changed Gemfile, #{BOOTSTRAP}, config/boot.rb; now run `bundle install`"), out2
      assert_equal [NEW_GEMFILE, NEW_BOOT], files(app).values
    end
  end

  # CRLF files get CRLF lines, and still parse.
  def test_line_endings_are_kept
    crlf = ->(text) { text.gsub("\n", "\r\n") }
    with_files([["Gemfile", crlf.(GEMFILE)], ["config/boot.rb", crlf.(%(require "bundler/setup"\nrequire "json"))]]) do |app|
      assert_equal 0, install(app).last
      assert_equal [crlf.(NEW_GEMFILE), crlf.(%(#{NEW_BOOT}require "json"))], files(app).values
      assert parses?(File.join(app, "config", "boot.rb"))
    end
  end

  def test_modes_are_kept
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT]]) do |app|
      File.chmod(0o600, File.join(app, "Gemfile"))
      File.chmod(0o754, File.join(app, "config", "boot.rb"))
      assert_equal 0, install(app).last
      assert_equal [0o600, 0o754], files(app).keys.map { |f| File.stat(File.join(app, f)).mode & 0o7777 }
    end
  end

  # Run as root on a user's files: they stay the user's.
  def test_root_keeps_the_owner
    skip "needs root to own files as another user" unless Process.euid.zero?

    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT]]) do |app|
      nobody = Etc.getpwnam("nobody")
      FileUtils.chown(nobody.uid, Etc.getgrnam("nogroup").gid, files(app).keys.map { |f| File.join(app, f) })
      File.chmod(0o2664, File.join(app, "Gemfile")) # setgid: chown would clear it
      assert_equal 0, install(app).last
      stats = files(app).keys.map { |f| File.stat(File.join(app, f)) }
      assert_equal [[nobody.uid, Etc.getgrnam("nogroup").gid]] * 2, stats.map { |st| [st.uid, st.gid] }
      assert_equal [0o2664, 0o644], stats.map { |st| st.mode & 0o7777 }
      assert_equal [NEW_GEMFILE, NEW_BOOT], files(app).values
      # The file install adds is its directory's owner's too.
      config = File.stat(File.join(app, "config"))
      assert_equal [config.uid, config.gid], File.stat(File.join(app, BOOTSTRAP)).then { |st| [st.uid, st.gid] }
    end
  end

  # A user who may write a file they do not own cannot replace it keeping its owner: refused.
  # Nothing is written and no temp file is left.
  def test_an_owner_it_cannot_keep_is_refused
    skip "needs root to own files as another user" unless Process.euid.zero?

    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT]]) do |app|
      FileUtils.chown_R("nobody", "nogroup", app)
      FileUtils.chown("root", "nogroup", File.join(app, "Gemfile"))
      File.chmod(0o664, File.join(app, "Gemfile"))
      searchable_parent(app)
      before = listing(app)
      out, err, status = install(app, as_nobody: true)
      assert_equal ["", 1], [out, status]
      assert_match(/\Aloadscan install: Gemfile belongs to uid 0 gid \d+: replaced by uid \d+ it would change owner/, err)
      assert_equal [GEMFILE, BOOT], files(app).values
      assert_equal before, listing(app)
    end
  end

  # The second file cannot be written (config/ is not the user's: the file install adds there
  # first): the first is not replaced either, and its temp file is removed.
  def test_a_failure_on_one_file_leaves_every_file_as_it_was
    skip "needs root to give the app to another user" unless Process.euid.zero?

    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT]]) do |app|
      FileUtils.chown("nobody", "nogroup", [app, File.join(app, "Gemfile"), File.join(app, "config", "boot.rb")])
      searchable_parent(app)
      before = listing(app)
      out, err, status = install(app, as_nobody: true)
      assert_equal ["", 1], [out, status]
      assert_match(%r{\Aloadscan install: Permission denied - adding #{Regexp.escape(app)}/#{BOOTSTRAP} \(by a new file beside it: \.loadscan_boot\.rb\.loadscan-install-}, err)
      assert_equal [GEMFILE, BOOT], files(app).values
      assert_equal before, listing(app)
    end
  end

  # SIGINT while the files are being replaced (sent from File.rename, its first call): the
  # signal waits until both are, then ends the process; no temp file is left.
  INTERRUPT = <<~RUBY
    File.singleton_class.prepend(Module.new do
      def rename(*)
        unless $interrupted
          $interrupted = true
          Process.kill(:INT, Process.pid)
          sleep 1 # the signal is handled here unless it is held back
        end
        super
      end
    end)
  RUBY

  def test_an_interrupt_leaves_whole_files_and_no_temp_file
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT], ["interrupt.rb", INTERRUPT]]) do |app|
      before = listing(app)
      run = run_ruby(file: EXE, args: ["install"], ruby_opts: ["-r", File.join(app, "interrupt.rb")], chdir: app, env: { "BUNDLE_GEMFILE" => nil })
      assert_equal Signal.list["INT"], run.status.termsig, "#{run.status.inspect}: #{run.stderr}"
      assert_equal [NEW_GEMFILE, NEW_BOOT], files(app).values
      assert_equal (before + [BOOTSTRAP]).sort, listing(app)
    end
  end

  # Files it cannot replace without breaking something are refused, nothing written.
  def test_refuses_hard_links_special_files_and_other_encodings
    [[:link, "Gemfile has 2 hard links: loadscan install replaces the file, which would leave the other links with the old text"],
     [:fifo, "Gemfile is not a regular file (fifo)"],
     [:latin1, "Gemfile is not UTF-8 text"]].each do |kind, message|
      with_files([["config/boot.rb", BOOT], ["other", GEMFILE]]) do |app|
        gemfile = File.join(app, "Gemfile")
        case kind
        when :link then File.link(File.join(app, "other"), gemfile)
        when :fifo then File.mkfifo(gemfile)
        when :latin1 then File.binwrite(gemfile, "# caf\xE9\n#{GEMFILE}".b)
        end
        before = listing(app)
        out, err, status = install(app)
        assert_equal ["", 1], [out, status], kind
        assert err.start_with?("loadscan install: #{message}"), err
        assert_equal [before, BOOT], [listing(app), File.read(File.join(app, "config", "boot.rb"))]
      end
    end
  end

  # Issue 47: a file's extended attributes and its ACL (Linux keeps it as the attribute
  # system.posix_acl_access) are kept, with its mode and owner; a file without any gets none,
  # though its directory's default ACL would give a new file one. Set and read by Debian's
  # python3 (os.setxattr: the acl and attr packages' tools may not be installed), not by loadscan.
  PYTHON = "/usr/bin/python3"
  # version 2; user::rw-, user:65534:r--, group::r--, mask::r--, other::---
  ACL = [2, 1, 6, -1, 2, 4, 65_534, 4, 4, -1, 0x10, 4, -1, 0x20, 0, -1].pack("L<" + "S<S<l<" * 5)
  XATTRS = <<~PY
    import os, sys, json
    path = sys.argv[2]
    if sys.argv[1] == "set":
        for name, hexvalue in json.loads(sys.argv[3]).items():
            os.setxattr(path, name, bytes.fromhex(hexvalue))
    else:
        print(json.dumps({n: os.getxattr(path, n).hex() for n in sorted(os.listxattr(path))}))
  PY

  def xattrs(path, set = nil)
    out, err, status = capture(PYTHON, "-c", XATTRS, set ? "set" : "get", path, *(JSON.generate(set.transform_values { |v| v.unpack1("H*") }) if set))
    skip "no user extended attributes or ACLs on this file system: #{err}" if set && !status.success? && err.include?("Operation not supported")
    assert status.success?, err
    JSON.parse(out).transform_values { |v| [v].pack("H*") } unless set
  end

  def test_extended_attributes_and_acls_are_kept
    skip "needs #{PYTHON}" unless File.executable?(PYTHON)

    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT]]) do |app|
      gemfile = File.join(app, "Gemfile")
      boot = File.join(app, "config", "boot.rb")
      File.chmod(0o640, gemfile)
      FileUtils.chown("nobody", "nogroup", gemfile) if Process.euid.zero?
      wanted = { "system.posix_acl_access" => ACL, "user.note" => "keep me\0" }
      xattrs(gemfile, wanted)
      # config/'s default ACL: a file made there gets an ACL unless install takes it off.
      xattrs(File.dirname(boot), { "system.posix_acl_default" => ACL })
      before = [gemfile, boot].map { |f| File.stat(f) }.map { |st| [st.mode, st.uid, st.gid] }
      boot_xattrs = xattrs(boot)
      _, err, status = install(app)
      assert_equal [0, ""], [status, err]
      assert_equal [NEW_GEMFILE, NEW_BOOT], files(app).values
      assert_equal wanted, xattrs(gemfile)
      assert_equal boot_xattrs, xattrs(boot), "no ACL from the directory's default"
      assert_equal before, [gemfile, boot].map { |f| File.stat(f) }.map { |st| [st.mode, st.uid, st.gid] }
    end
  end

  # Two files to replace, the second cannot be (a file mounted over config/boot.rb: rename
  # fails with EBUSY after the Gemfile was replaced): the Gemfile is put back, every file as it
  # was, nothing left beside them.
  def test_a_failed_rename_puts_back_the_files_already_replaced
    with_files([["Gemfile", GEMFILE], ["config/boot.rb", BOOT], ["mounted.rb", BOOT]]) do |app|
      boot = File.join(app, "config", "boot.rb")
      script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
      skip "no mount namespace here (unshare -m needs root)" unless
        system("unshare", "-m", "sh", "-c", script, "sh", File.join(app, "mounted.rb"), boot, "true", out: File::NULL, err: File::NULL)
      before = listing(app)
      inode = File.stat(File.join(app, "Gemfile")).ino
      run = run_ruby(command: ["unshare", "-m", "sh", "-c", script, "sh", File.join(app, "mounted.rb"), boot, RbConfig.ruby, EXE, "install"],
                     chdir: app, env: { "BUNDLE_GEMFILE" => nil })
      assert_equal ["", 1], [run.stdout, run.status.exitstatus], run.stderr
      assert_equal "loadscan install: Device or resource busy - replacing #{boot}; no file was changed\n", run.stderr
      assert_equal [GEMFILE, BOOT], files(app).values
      assert_equal inode, File.stat(File.join(app, "Gemfile")).ino, "the Gemfile itself, put back"
      assert_equal before, listing(app)
    end
  end
end
