# frozen_string_literal: true

require_relative "../test_helper"
require "json"
require_relative "../../lib/loadscan"
require_relative "../../lib/loadscan/cli"
require "stringio"

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
      %w[bogus] => /unknown command "bogus" \(commands: doctor, explain, lookup, build, verify, stats, problems, clear\)/,
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
      assert_match(/^ok$/, out)
      out, _, status = loadscan("--json", "doctor", cache: nil, chdir: "#{dir}/bare")
      assert_equal 1, status.exitstatus
      report = JSON.parse(out)
      refute report["ok"]
      assert_match(/config\/boot.rb does not set loadscan up: add `require "loadscan\/setup"`/, report["problems"].first)
    end
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
      %w[bogus] => 'unknown command "bogus" (commands: doctor, explain, lookup, build, verify, stats, problems, clear)',
      %w[--json Lookup a] => 'unknown command "Lookup" (commands: doctor, explain, lookup, build, verify, stats, problems, clear)',
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
