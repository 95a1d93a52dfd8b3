# frozen_string_literal: true

require_relative "../test_helper"
require "json"
require_relative "../../lib/loadscan/version"

class CLITest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  def loadscan(*args, cache:, env: {})
    Open3.capture3({ "LOADSCAN_CACHE_DIR" => cache, "RUBYOPT" => nil }.merge(env), RbConfig.ruby, EXE, *args)
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
      out, = loadscan("-I", "#{dir}/lib", "stats", cache: cache)
      assert_match(/^load_path_entries: \d+$/, out)
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
      assert_kind_of Integer, json.("stats")["features"]
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
      out, err, status = Open3.capture3({ "RUBYOPT" => nil, "LOADSCAN_CACHE_DIR" => "#{dir}/cache" }, RbConfig.ruby, EXE,
                                        "doctor", chdir: "#{dir}/app")
      assert_equal 0, status.exitstatus, out + err
      assert_match(/^require reaches loadscan: yes/, out)
      assert_match(/^ok$/, out)
      out, _, status = Open3.capture3({ "RUBYOPT" => nil }, RbConfig.ruby, EXE, "--json", "doctor", chdir: "#{dir}/bare")
      assert_equal 1, status.exitstatus
      report = JSON.parse(out)
      refute report["ok"]
      assert_match(/config\/boot.rb does not set loadscan up: add `require "loadscan\/setup"`/, report["problems"].first)
    end
  end

  # What `$LOAD_PATH.resolve_feature_path` says in a fresh Ruby with only `entry` on the path.
  def ruby_resolve(entry, feature)
    out, = Open3.capture2(RbConfig.ruby, "--disable-gems", "-I", entry, "-e",
                          "r = $LOAD_PATH.resolve_feature_path(ARGV[0]) rescue nil; print r ? r[1] : ''", feature)
    out.empty? ? nil : out
  end
end
