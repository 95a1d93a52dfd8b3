# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../lib/loadscan"

# Settings never break a boot: each bad value is one problem (one warning at setup) and the
# default applies.
class ConfigTest < Minitest::Test
  def config(env = {}, **keywords)
    Loadscan::Config.new(env: { "LOADSCAN_CACHE_DIR" => "/tmp/c" }.merge(env), **keywords)
  end

  def test_defaults
    c = config
    assert c.enabled
    assert c.lazy
    refute c.readonly
    refute c.stats
    assert_equal 0, c.threads
    assert_equal "mtime", c.validate
    assert_equal "/tmp/c", c.cache_dir
    assert_empty c.problems
  end

  def test_flags_in_any_case_and_empty_means_default
    assert config({ "LOADSCAN_READONLY" => "YES" }).readonly
    refute config({ "LOADSCAN_LAZY" => "Off" }).lazy
    assert config({ "LOADSCAN_DISABLE" => "" }).enabled
    assert_equal "listing", config({ "LOADSCAN_VALIDATE" => "LISTING" }).validate
    assert_nil config({ "LOADSCAN_CACHE" => "false" }).cache_dir
  end

  BAD = {
    "LOADSCAN_THREADS" => ["abc", /LOADSCAN_THREADS "abc" is not a whole number/, :threads, 0],
    "LOADSCAN_LAZY" => ["maybe", /LOADSCAN_LAZY="maybe" is not a flag .*using the default \(on\)/, :lazy, true],
    "LOADSCAN_VALIDATE" => ["digest", /LOADSCAN_VALIDATE "digest" is not one of mtime, listing/, :validate, "mtime"],
    "LOADSCAN_CACHE_DIR" => ["relative/dir", /LOADSCAN_CACHE_DIR "relative\/dir" is not an absolute path/, :cache_dir, nil],
    "LOADSCAN_READ_ONLY" => ["1", /LOADSCAN_READ_ONLY is not a loadscan setting \(did you mean LOADSCAN_READONLY\?\)/, :readonly, false],
  }.freeze

  def test_each_bad_value_is_one_problem_and_the_default_applies
    BAD.each do |name, (value, message, attribute, default)|
      env = { name => value }
      c = Loadscan::Config.new(env: name == "LOADSCAN_CACHE_DIR" ? env : { "LOADSCAN_CACHE_DIR" => "/tmp/c" }.merge(env))
      assert_equal 1, c.problems.size, "#{name}: #{c.problems.inspect}"
      assert_match message, c.problems.first
      expected = default.nil? ? Loadscan::Config.new(env: {}).cache_dir : default
      assert_equal expected, c.public_send(attribute), name
    end
  end

  def test_threads_are_clamped
    c = config({ "LOADSCAN_THREADS" => "100000" })
    assert_equal Loadscan::Config::MAX_THREADS, c.threads
    assert_match(/more threads than a scan can use/, c.problems.first)
    assert_equal 0, config({ "LOADSCAN_THREADS" => "-2" }).threads
    assert_equal 3, config(threads: 3).threads
  end

  def test_a_script_outside_any_app_caches_in_the_users_cache_dir_never_the_cwd
    Dir.mktmpdir do |home|
      c = Loadscan::Config.new(env: { "HOME" => home })
      assert c.cache_dir.start_with?("#{home}/.cache/loadscan/"), c.cache_dir
      assert_equal c.cache_dir, Loadscan::Config.new(env: { "HOME" => home }).cache_dir, "the same program, the same dir"
      c = Loadscan::Config.new(env: { "XDG_CACHE_HOME" => "#{home}/xdg", "HOME" => home })
      assert c.cache_dir.start_with?("#{home}/xdg/loadscan/"), c.cache_dir
      assert_nil Loadscan::Config.new(env: { "HOME" => "/nonexistent/home" }).cache_dir
    end
  end

  # The same in real boots: each bad value, set alone, boots exactly like stock Ruby with
  # exactly one warning, which names the setting.
  def test_bad_values_boot_like_stock_with_one_warning
    with_files([["e/a.rb", "$log << :a"]]) do |dir|
      code = "$LOAD_PATH.unshift(#{"#{dir}/e".inspect}); $log = []; require 'a'; report('log' => $log, 'r' => require('a'))"
      BAD.each do |name, (value, message, _, _)|
        env = { name => value }
        stock, fast = run_both(code, env: env)
        assert_equal stock.report, fast.report, name
        warnings = fast.stderr.lines.grep(/loadscan/)
        assert_equal 1, warnings.size, "#{name}=#{value}: #{fast.stderr}"
        assert_match message, warnings.first
      end
    end
  end
end
