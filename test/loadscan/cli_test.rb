# frozen_string_literal: true

require_relative "../test_helper"
require "json"
require_relative "../../lib/loadscan"
require_relative "../../lib/loadscan/cli"
require "stringio"
require "etc"

class CLITest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  # exe/loadscan in a process of its own: [stdout, stderr, status].
  def loadscan(*args, cache:, env: {}, chdir: Dir.pwd)
    run = run_ruby(file: EXE, args: args, env: { "LOADSCAN_CACHE_DIR" => cache }.merge(env), chdir: chdir)
    [run.stdout, run.stderr, run.status]
  end

  def test_lookup_agrees_with_ruby_and_stats_and_clear_work
    with_files([["lib/a.rb", ""], ["lib/b/c.so", ""], ["lib/loop", :symlink, "."], ["lib/gone", :symlink, "nowhere"]]) do |dir|
      cache = File.join(dir, "cache")
      features = %w[a b/c nope loop/a]
      ruby = features.map do |f|
        found = (Dir.chdir(dir) { ruby_resolve("lib", f) })
        "#{f}\t#{found || "missing"}"
      end
      out, err, status = loadscan("-I", "#{dir}/lib", "lookup", *features, cache: cache)
      assert status.success?, err
      assert_equal ["a\t#{dir}/lib/a.rb", "b/c\t#{dir}/lib/b/c.so", "nope\tmissing", "loop/a\t#{dir}/lib/loop/a.rb"], ruby
      assert_equal ruby, out.lines.map(&:chomp), "lazy listing follows the symlink loop as far as the feature names"
      out, = loadscan("-I", "#{dir}/lib", "lookup", *features, cache: cache, env: { "LOADSCAN_LAZY" => "0" })
      assert_equal ruby[0, 3] + ["loop/a\tunknown"], out.lines.map(&:chomp), "a full scan cuts the loop"
      out, = loadscan("-I", "#{dir}/lib", "problems", cache: cache, env: { "LOADSCAN_LAZY" => "0" })
      assert_match(/^loop\t.*symlink loop/, out)
      out, _, status = loadscan("-I", "#{dir}/lib", "stats", cache: cache)
      assert_equal 1, status.exitstatus, "no boot recorded yet"
      assert_equal "no boot recorded in #{cache} yet (a boot with loadscan records its figures there at exit)\n", out
      out, = loadscan("-I", "#{dir}/lib", "problems", cache: cache)
      assert_match(/^dangling\t.*gone/, out)
      refute File.exist?(File.join(cache, "loadscan.cache")), "the CLI never writes the cache"
      out, = loadscan("clear", cache: cache)
      assert_equal "nothing to remove in #{cache}\n", out
    end
  end

  def test_help_version_and_usage_errors
    out, err, status = loadscan("--help", cache: "/nonexistent")
    assert_equal 0, status.exitstatus
    assert_empty err
    assert_match(/\AUsage: loadscan \[options\] COMMAND \[ARGS\]\n/, out)
    %w[doctor explain lookup build verify stats problems clear].each { |c| assert_match(/^  #{c} /, out) }
    assert_equal loadscan("-h", cache: "/nonexistent")[0], out
    assert_equal ["loadscan #{Loadscan::VERSION}\n", "", 0], loadscan("--version", cache: "/x").then { |o, e, s| [o, e, s.exitstatus] }
    {
      %w[bogus] => /unknown command "bogus" \(commands: doctor, explain, lookup, build, verify, stats, problems, clear, profile, install, uninstall\)/,
      %w[--bogus stats] => /invalid option: --bogus/,
      [] => /no command given/,
      %w[explain] => /explain needs at least one FEATURE/,
    }.each do |args, message|
      out, err, status = loadscan(*args, cache: "/nonexistent")
      assert_equal 1, status.exitstatus, args.inspect
      assert_empty out
      assert_match message, err
      assert_match(/Run `loadscan --help` for usage/, err)
    end
  end

  def test_json_on_every_command_and_joined_include_dirs
    with_files([["lib/a.rb", ""], ["lib/sub/b.rb", ""]]) do |dir|
      cache = File.join(dir, "cache")
      json = ->(*args) { JSON.parse(loadscan("--json", "-I#{dir}/lib", *args, cache: cache).first) }
      assert_equal [{ "feature" => "a", "loadscan" => "#{dir}/lib/a.rb", "ruby" => "#{dir}/lib/a.rb", "agree" => true }],
                   json.("lookup", "a")
      explained = json.("explain", "sub/b", "nope").map { |r| r.slice("feature", "loadscan", "ruby", "candidates") }
      assert_equal [{ "feature" => "sub/b", "loadscan" => "#{dir}/lib/sub/b.rb", "ruby" => "#{dir}/lib/sub/b.rb",
                      "candidates" => [{ "rank" => 0, "root" => "#{dir}/lib", "kind" => "rb" }] },
                    { "feature" => "nope", "loadscan" => "missing", "ruby" => nil, "candidates" => [] }], explained
      verified = json.("verify")
      assert_operator verified["checked"], :>=, 2
      assert_empty verified["disagree"]
      assert_equal({ "cache_dir" => cache, "last_boot" => nil }, json.("stats"))
      assert_kind_of Array, json.("problems")
      assert_equal({ "cache_dir" => cache, "removed" => [] }, json.("clear"))
    end
  end

  # `build` writes the cache from the app's whole load path; a later read-only boot serves every
  # entry from it.
  def test_build_writes_a_cache_that_boots_use
    with_files([["lib/a.rb", ""], ["lib/deep/er/b.rb", ""]]) do |dir|
      cache = File.join(dir, "cache")
      out, err, status = loadscan("-I", "#{dir}/lib", "build", cache: cache)
      assert status.success?, err
      assert_match(/\Awritten #{Regexp.escape(cache)}: \d+ entries, \d+ features/, out)
      run = run_ruby("$LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require 'deep/er/b'; report(Loadscan.stats)",
                     loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache, "LOADSCAN_READONLY" => "1" })
      assert run.status.success?, run.stderr
      assert_equal 0, run.report[:roots_scanned], run.report.inspect
      assert_equal 0, run.report[:dirs_listed_lazily], "build listed every directory: #{run.report.inspect}"
    end
  end

  # `doctor` boots the app as it boots: an app whose config/boot.rb sets loadscan up is fine; one
  # whose boot does not is told how to fix it, with exit 1.
  def test_doctor
    with_files([["app/config/boot.rb", "require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}\n"],
                ["bare/config/boot.rb", "# nothing\n"]]) do |dir|
      out, err, status = loadscan("doctor", cache: "#{dir}/cache", chdir: "#{dir}/app")
      assert_equal 0, status.exitstatus, out + err
      assert_match(/^require reaches loadscan: yes/, out)
      assert_match(/^requires answered by loadscan: 1 of the trial boot's 1 \(from its setup on\); a plain require of a file on the load path: answered from the index$/, out)
      assert_match(/^ok$/, out)
      out, _, status = loadscan("--json", "doctor", cache: nil, chdir: "#{dir}/bare")
      assert_equal 1, status.exitstatus
      report = JSON.parse(out)
      refute report["ok"]
      assert_equal [false, false, false, nil, nil], report.values_at("set_up_by_boot", "active", "engaged", "stats", "trial_require")
      assert_equal 1, report["problems"].size, report["problems"].inspect
      # (No Bootsnap in that boot: nothing said of it.)
      assert_equal 'config/boot.rb does not set loadscan up: run `loadscan install`: it adds `gem "loadscan"` to the Gemfile ' \
                   'and `require "loadscan/setup"` after `require "bundler/setup"` to config/boot.rb', report["problems"].first
    end
  end

  # A boot that raises is reported as failed; one that ends its process (exit!) as one that
  # could not run (`trial_error` in --json), both with exit 1.
  def test_doctor_on_a_boot_that_fails_or_cannot_run
    with_files([["raises/config/boot.rb", "raise ArgumentError, 'broken boot'\n"],
                ["exits/config/boot.rb", "$stderr.puts 'gone'; exit!(3)\n"]]) do |dir|
      out, err, status = loadscan("doctor", cache: "#{dir}/cache", chdir: "#{dir}/raises")
      assert_equal 1, status.exitstatus, out + err
      assert_match(/the boot failed: ArgumentError: broken boot/, out)
      out, err, status = loadscan("--json", "doctor", cache: "#{dir}/cache", chdir: "#{dir}/exits")
      assert_equal 1, status.exitstatus, out + err
      report = JSON.parse(out)
      assert_equal "exit 3: gone", report["trial_error"]
      assert_equal ["the boot could not run: exit 3: gone"], report["problems"]
    end
  end

  # exe/loadscan with at most 2 GiB of address space (reading /dev/zero must not take the
  # machine down when it fails) and `timeout` seconds: [stdout, stderr, status, seconds].
  def loadscan_bounded(*args, cache:, env: {}, chdir: Dir.pwd, timeout: 20)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    run = run_ruby(command: ["prlimit", "--as=#{2 << 30}", RbConfig.ruby, EXE, *args], env: { "LOADSCAN_CACHE_DIR" => cache }.merge(env),
                   chdir: chdir, timeout: timeout)
    [run.stdout, run.stderr, run.status, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
  end

  # A real boot whose program name carries terminal escapes records its figures.
  def record_a_boot(cache, program: "\e]0;owned\a\e[2J")
    run = run_ruby("$0 = #{program.inspect}", loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
    assert run.success?, run.stderr
    File.join(cache, "last_boot.json").tap { |path| assert File.file?(path) }
  end

  # A boot that records its figures (its program name carrying terminal escapes), then
  # `make.(path_of_last_boot_json, its_content)`; yields the cache dir.
  def with_last_boot(make = nil)
    with_files([["app/config/boot.rb", "require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}\n"]]) do |dir|
      cache = File.join(dir, "cache")
      path = record_a_boot(cache)
      if make
        record = File.read(path)
        File.delete(path)
        make.(path, record)
      end
      yield cache, path, dir
    end
  end

  # last_boot.json gets the checks the cache file gets before `stats` reads it: each hostile
  # file is one warning naming why, then "no boot recorded", exit 1, promptly.
  def assert_last_boot_refused(why, &make)
    with_last_boot(make) do |cache, path|
      out, err, status, seconds = loadscan_bounded("stats", cache: cache)
      assert_equal [1, "loadscan: #{path} is not used: #{why}\n"], [status.exitstatus, err], out
      assert_operator seconds, :<, 15
      assert_equal "no boot recorded in #{cache} yet (a boot with loadscan records its figures there at exit)\n", out
    end
  end

  def test_stats_does_not_block_on_a_fifo
    assert_last_boot_refused("not a regular file (fifo)") { |path| system("mkfifo", path, exception: true) }
  end

  def test_stats_does_not_follow_a_symlink_to_dev_zero
    assert_last_boot_refused("it is a symlink") { |path| File.symlink("/dev/zero", path) }
  end

  def test_stats_does_not_read_another_users_file
    assert_last_boot_refused("owned by uid #{Etc.getpwnam("nobody").uid}, not by root or uid 0") do |path, record|
      File.write(path, record)
      FileUtils.chown("nobody", nil, path)
    end
  end

  def test_stats_does_not_read_a_file_others_may_write
    assert_last_boot_refused("writable by group or others (mode 666)") do |path, record|
      File.write(path, record)
      File.chmod(0o666, path)
    end
  end

  def test_stats_does_not_read_a_file_too_large
    assert_last_boot_refused("larger than 65536 bytes") { |path, record| File.write(path, record.sub("{", "{\"pad\":\"#{"x" * (64 << 10)}\",")) }
  end

  def test_doctor_does_not_block_on_a_fifo
    with_last_boot(->(path, _) { system("mkfifo", path, exception: true) }) do |cache, path, dir|
      out, err, status, seconds = loadscan_bounded("doctor", cache: cache, chdir: File.join(dir, "app"))
      assert_equal [0, "loadscan: #{path} is not used: not a regular file (fifo)\n"], [status.exitstatus, err], out
      assert_operator seconds, :<, 15
      assert_match(/^last boot: none recorded yet$/, out)
    end
  end

  # What the record holds is printed with control characters escaped (JSON escapes them its
  # own way).
  def test_stats_and_doctor_escape_control_characters
    with_last_boot do |cache, _, dir|
      [loadscan_bounded("stats", cache: cache), loadscan_bounded("doctor", cache: cache, chdir: File.join(dir, "app"))].each do |out, err, status|
        assert_equal [0, ""], [status.exitstatus, err]
        refute_match(/[\x00-\x08\x0b-\x1f\x7f]/, out)
        assert_includes out, "\\x1B]0;owned\\x07\\x1B[2J (pid "
      end
      out, = loadscan_bounded("--json", "stats", cache: cache)
      assert_equal "\e]0;owned\a\e[2J", JSON.parse(out).dig("last_boot", "program")
    end
  end

  # doctor stops a boot that does not finish within --timeout seconds (killing its process
  # group) and says it hangs.
  def test_doctor_stops_a_boot_that_hangs
    with_files([["hangs/config/boot.rb", "File.write('../hangs.pid', Process.pid.to_s); $stderr.puts 'waiting for the database'; sleep 60\n"]]) do |dir|
      out, err, status, seconds = loadscan_bounded("--timeout", "2", "doctor", cache: "#{dir}/cache", chdir: "#{dir}/hangs", timeout: 50)
      assert_equal 1, status.exitstatus, out + err
      assert_operator seconds, :<, 20
      assert_match(/^PROBLEM: config\/boot.rb hangs: it had not finished after 2 s and was stopped \(its last output: waiting for the database\); /, out)
      assert_dead Integer(File.read("#{dir}/hangs.pid"))
      out, err, status = loadscan_bounded("--json", "--timeout", "1.5", "doctor", cache: "#{dir}/cache", chdir: "#{dir}/hangs", timeout: 50)
      assert_equal 1, status.exitstatus, err
      assert_match(/hangs: it had not finished after 1.5 s/, JSON.parse(out)["problems"].first)
      assert_match(/--timeout SECONDS +doctor: how long the app's boot may take \(default 60\)$/, loadscan("--help", cache: "/x").first)
      _, err, status = loadscan("--timeout", "0", "doctor", cache: "/x")
      assert_equal [1, "loadscan: --timeout needs a number of seconds above 0\n#{USAGE}"], [status.exitstatus, err]
    end
  end

  # A boot that leaves a process behind holding stderr is not waited for: that process is
  # stopped with the boot's process group.
  def test_doctor_does_not_wait_for_what_the_boot_leaves_running
    setup_rb = File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect
    with_files([["leaves/config/boot.rb", "File.write('../leaves.pid', spawn('sleep', '60').to_s)\nrequire #{setup_rb}\n"]]) do |dir|
      out, err, status, seconds = loadscan_bounded("doctor", cache: "#{dir}/cache", chdir: "#{dir}/leaves", timeout: 90)
      assert_equal [0, ""], [status.exitstatus, err], out
      assert_operator seconds, :<, 20, "not waiting for the sleep the boot left holding stderr"
      assert_match(/^ok$/, out)
      assert_dead Integer(File.read("#{dir}/leaves.pid"))
    end
  end

  # Paths are bytes: under a directory named josé (UTF-8) or caf\xE9 (Latin-1), every command
  # works, in text (a stray byte shown as \xNN) and in JSON (as the escape \udcNN, which Python's
  # os.fsencode turns back into the byte); answers agree with stock Ruby's, run apart.
  def test_every_command_under_non_ascii_and_non_utf8_paths
    setup_rb = File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect
    ["josé", "caf\xE9".b].each do |name|
      with_files([["#{name}/app/lib/a.rb".b, ""], ["#{name}/app/lib/sub/b.rb".b, ""], ["#{name}/app/lib/gone".b, :symlink, "nowhere"],
                  ["#{name}/app/config/boot.rb".b, "$LOAD_PATH.unshift(File.expand_path('../lib', __dir__))\nrequire #{setup_rb}\n"]]) do |dir|
        app = File.join(dir, name).b + "/app"
        lib = "#{app}/lib"
        stock = Dir.chdir(app) { ruby_resolve("lib", "sub/b") }.b
        assert_equal "#{lib}/sub/b.rb", stock
        text = ->(path) { path.b.gsub(/[\x80-\xff]/n) { |c| format("\\x%02X", c.ord) }.force_encoding(Encoding::UTF_8) }
        text = ->(path) { path.dup.force_encoding(Encoding::UTF_8) } if name == "josé"
        json = ->(path) { path.b.gsub(/[\x80-\xff]/n) { |c| format("\\udc%02x", c.ord) } }
        json = ->(path) { JSON.generate(path.dup.force_encoding(Encoding::UTF_8))[1..-2] } if name == "josé"
        run = ->(*args) { loadscan_bounded(*args, cache: "#{app}/tmp/cache/loadscan", chdir: app).first(3) }

        out, err, status = run.("-I", "lib", "lookup", "sub/b", "nope")
        assert_equal ["sub/b\t#{text.(stock)}\nnope\tmissing\n", "", 0], [out, err, status.exitstatus], name.inspect
        out, err, status = run.("-I", lib, "explain", "sub/b")
        assert_equal ["", 0], [err, status.exitstatus], out
        assert_includes out, "  ruby: #{text.(stock)}\n  why: the first entry"
        assert_includes out, "  entry 0: #{text.(lib)} has rb\n"
        # A boot of the app's, whose figures `stats` shows (`build` records none).
        booted = run_ruby(file: "#{app}/config/boot.rb", env: { "LOADSCAN_CACHE_DIR" => "#{app}/tmp/cache/loadscan" }, chdir: app)
        assert booted.success?, booted.stderr
        %w[verify problems build stats doctor].each do |command|
          out, err, status = run.("-I", "lib", command)
          assert_equal ["", 0], [err, status.exitstatus], "#{name.inspect} #{command}: #{out}"
          assert_predicate out, :valid_encoding?
          assert_match(/, 0 disagree$/, out) if command == "verify"
        end
        %w[lookup explain verify problems build stats doctor clear].each do |command|
          out, err, status = run.("--json", "-I", "lib", command, *(%w[sub/b] if %w[lookup explain].include?(command)))
          assert_equal ["", 0], [err, status.exitstatus], "#{name.inspect} --json #{command}: #{out}"
          JSON.parse(out) # valid JSON
          assert_includes out, json.(app), "#{name.inspect} --json #{command}" unless %w[verify problems].include?(command)
        end
        out, = run.("--json", "-I", "lib", "lookup", "sub/b")
        assert_includes out, "\"ruby\": \"#{json.(stock)}\""
        assert_equal stock, fsencode(JSON.parse(out)[0]["loadscan"]), "the bytes come back from the JSON"
      end
    end
  end

  # With RUBYOPT=-rloadscan/setup (loadscan set up before the command line runs, from the
  # environment), the command line's own settings still apply: only `build` and `clear` write,
  # and --cache-dir is the cache they use, not LOADSCAN_CACHE_DIR.
  def test_commands_keep_their_settings_when_rubyopt_set_loadscan_up
    with_files([["lib/a.rb", ""], ["app/config/boot.rb", "# nothing\n"]]) do |dir|
      env_cache = "#{dir}/env-cache"
      given = "#{dir}/given"
      env = { "RUBYOPT" => "-I#{Loadscan::TestSupport::LIB} -rloadscan/setup" }
      %w[lookup explain verify problems].each do |command|
        [[], ["--cache-dir", given]].each do |option|
          out, err, status = loadscan(*option, "-I", "#{dir}/lib", command, *(%w[a] if %w[lookup explain].include?(command)),
                                      cache: env_cache, env: env)
          assert_equal ["", 0], [err, status.exitstatus], "#{command} #{option.join(" ")}: #{out}"
          assert_empty [env_cache, given].flat_map { |d| Dir.glob("#{d}/*") }, "#{command} #{option.join(" ")} wrote"
        end
      end
      out, err, status = loadscan("--cache-dir", given, "-I", "#{dir}/lib", "build", cache: env_cache, env: env)
      assert_equal ["", 0], [err, status.exitstatus], out
      assert_match(/\Awritten #{Regexp.escape(given)}: /, out)
      assert_equal %w[loadscan.cache], Dir.children(given).sort, "as a build without RUBYOPT (no last boot: build is no boot)"
      refute File.exist?(env_cache), "LOADSCAN_CACHE_DIR untouched"
      out, err, status = loadscan("--timeout", "30", "doctor", cache: env_cache, env: env, chdir: "#{dir}/app")
      assert_equal [0, ""], [status.exitstatus, err], out # RUBYOPT sets loadscan up in its boot too
      refute File.exist?(env_cache), "doctor wrote nothing"
    end
  end

  # A path's bytes from a JSON string the CLI wrote: the lone surrogates U+DC80..U+DCFF (which
  # Ruby's JSON parser leaves as their 3-byte forms, \xED\xB2\x80..\xED\xB3\xBF) back to bytes.
  def fsencode(string)
    string.b.gsub(/\xED[\xB2\xB3][\x80-\xBF]/n) { |s| ((((s.getbyte(1) & 0x3F) << 6) | (s.getbyte(2) & 0x3F)) - 0xC00).chr }
  end

  # Gone, or a zombie nobody reaped yet (within a few seconds of the kill).
  def assert_dead(pid)
    20.times do
      stat = File.read("/proc/#{pid}/stat") rescue break # rubocop:disable Style/RescueModifier
      break if stat[/\) (\S)/, 1] == "Z"

      sleep 0.1
    end
    stat = File.read("/proc/#{pid}/stat") rescue nil # rubocop:disable Style/RescueModifier
    assert stat.nil? || stat[/\) (\S)/, 1] == "Z", "process #{pid} still runs"
  ensure
    Process.kill(:KILL, pid) rescue nil # rubocop:disable Style/RescueModifier
  end

  # The command line parsed in process: Loadscan::CLI.new(argv, out:, err:, env:).run, with
  # stdout and stderr as strings. Commands that start loadscan run in a fork (in_fork).
  def cli(*argv, env: {})
    out = StringIO.new
    err = StringIO.new
    status = Loadscan::CLI.new(argv, out: out, err: err, env: env).run
    [out.string, err.string, status]
  end

  USAGE = "Run `loadscan --help` for usage.\n"

  def test_usage_errors_in_process
    {
      [] => "no command given",
      %w[bogus] => 'unknown command "bogus" (commands: doctor, explain, lookup, build, verify, stats, problems, clear, profile, install, uninstall)',
      %w[--json Lookup a] => 'unknown command "Lookup" (commands: doctor, explain, lookup, build, verify, stats, problems, clear, profile, install, uninstall)',
      %w[--bogus stats] => "invalid option: --bogus",
      %w[-X stats] => "invalid option: -X",
      %w[-I] => "missing argument: -I",
      %w[--cache-dir] => "missing argument: --cache-dir",
      %w[--json=yes stats] => "needless argument: --json=yes",
      %w[lookup] => "lookup needs at least one FEATURE",
      %w[-I lib explain] => "explain needs at least one FEATURE",
    }.each do |argv, message|
      assert_equal ["", "loadscan: #{message}\n#{USAGE}", 1], cli(*argv), argv.inspect
    end
  end

  def test_help_and_version_in_process
    out, err, status = cli("stats", "--help") # options anywhere, help before the command runs
    assert_equal [0, ""], [status, err]
    assert_match(/\AUsage: loadscan \[options\] COMMAND \[ARGS\]\n\nCommands:\n/, out)
    assert_match(/^    -I DIR +add DIR in front of the load path \(-IDIR or -I DIR\)$/, out)
    assert_match(/^        --json +print JSON$/, out)
    assert_equal ["loadscan #{Loadscan::VERSION}\n", "", 0], cli("--version", "bogus")
  end

  # `clear` reads only the command line and the environment: --cache-dir (expanded against the
  # cwd, joined or not) beats LOADSCAN_CACHE_DIR; --json anywhere prints JSON; only loadscan's
  # own file is removed.
  # Issue 47: `clear` on a cache it cannot remove (a read-only mount): one line saying why,
  # nothing on stdout, exit 1; the files stay.
  def test_clear_on_a_read_only_cache_fails_with_one_line
    with_files([["app/x", ""]]) do |dir|
      cache = File.join(dir, "cache")
      assert run_ruby("nil", loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache }).success?
      files = Dir.children(cache).sort
      assert_includes files, "loadscan.cache"
      script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
      skip "no mount namespace here (unshare -m needs root)" unless
        system("unshare", "-m", "sh", "-c", script, "sh", cache, "true", out: File::NULL, err: File::NULL)
      [[], ["--json"]].each do |json|
        run = run_ruby(command: ["unshare", "-m", "sh", "-c", script, "sh", cache, RbConfig.ruby, EXE, *json, "clear"],
                       env: { "LOADSCAN_CACHE_DIR" => cache }, chdir: File.join(dir, "app"))
        assert_equal ["", 1], [run.stdout, run.status.exitstatus], run.stderr
        assert_match(%r{\Aloadscan clear: could not remove #{Regexp.escape(cache)}/\S+: Read-only file system[^\n]*\n\z}, run.stderr)
        assert_equal files, Dir.children(cache).sort
      end
    end
  end

  # Ctrl-C in the middle of a command (sent from inside it: no race): no backtrace, and the
  # command ends by SIGINT as a shell expects.
  def test_an_interrupt_ends_a_command_without_a_backtrace
    interrupt = %(Loadscan::CLI.prepend(Module.new { private def cmd_lookup(*) = Process.kill(:INT, Process.pid) && sleep(60) })\n)
    with_files([["interrupt.rb", interrupt]]) do |dir|
      run = run_ruby(file: EXE, args: %w[lookup json], ruby_opts: ["-r", File.join(Loadscan::TestSupport::LIB, "loadscan/cli"), "-r", File.join(dir, "interrupt.rb")],
                     env: { "LOADSCAN_CACHE_DIR" => File.join(dir, "cache") }, chdir: dir)
      assert_equal [Signal.list["INT"], "", ""], [run.status.termsig, run.stdout, run.stderr]
    end
  end

  def test_clear_with_cache_dir_and_json_in_process
    with_files([["c/loadscan.cache", "x"], ["c/index", "another tool's"], ["envdir/loadscan.cache", "y"]]) do |dir|
      env = { "LOADSCAN_CACHE_DIR" => "#{dir}/envdir" }
      out, err, status = Dir.chdir(dir) { cli("clear", "--cache-dir", "c", "--json", env: env) }
      assert_equal [0, ""], [status, err]
      assert_equal({ "cache_dir" => "#{dir}/c", "removed" => ["#{dir}/c/loadscan.cache"] }, JSON.parse(out))
      assert_equal %w[index], Dir.children("#{dir}/c")
      assert_equal ["nothing to remove in #{dir}/c\n", "", 0], cli("--cache-dir=#{dir}/c", "clear", env: env)
      assert_equal ["removed #{dir}/envdir/loadscan.cache\n", "", 0], cli("clear", env: env)
    end
  end

  # -IDIR and -I DIR, relative to the cwd, in the order given, in front of the load path.
  def test_include_dirs_in_process
    with_files([["a/x.rb", ""], ["b/x.rb", ""], ["b/y.rb", ""], ["c/z.rb", ""]]) do |dir|
      rows = in_fork do
        Dir.chdir(dir)
        ENV["LOADSCAN_CACHE_DIR"] = "#{dir}/cache"
        out, err, status = cli("-I#{dir}/a", "-I", "b", "--json", "-Ic", "lookup", "x", "y", "z", "nope")
        raise "exit #{status}: #{err}" unless status.zero? && err.empty?

        [JSON.parse(out), $LOAD_PATH.first(3)]
      end
      answers, load_path = rows
      assert_equal %W[#{dir}/a #{dir}/b #{dir}/c], load_path
      assert_equal [["x", "#{dir}/a/x.rb", true], ["y", "#{dir}/b/y.rb", true], ["z", "#{dir}/c/z.rb", true], %w[nope missing] + [true]],
                   answers.map { |r| r.values_at("feature", "loadscan", "agree") }
    end
  end

  # What `$LOAD_PATH.resolve_feature_path` says in a fresh Ruby with only `entry` on the path.
  def ruby_resolve(entry, feature)
    run = run_ruby("r = $LOAD_PATH.resolve_feature_path(ARGV[0]) rescue nil; report(r&.last)", ruby_opts: ["--disable-gems", "-I", entry],
                   args: [feature])
    assert run.success?, run.stderr
    run.report
  end
end
