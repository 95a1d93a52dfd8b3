# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../lib/loadscan"

# Settings never break a boot: each bad value is one problem (one warning at setup) and the
# default applies.
class ConfigTest < Minitest::Test
  def config(env = {}, **keywords)
    Loadscan::Config.new(env: { "LOADSCAN_CACHE_DIR" => "/tmp/c" }.merge(env), **keywords)
  end

  def only_problem(config)
    assert_equal 1, config.problems.size, config.problems.inspect
    config.problems.first
  end

  def test_defaults
    c = config
    assert c.enabled
    assert c.lazy
    refute c.readonly
    refute c.stats
    assert_equal :auto, c.gc, "GC deferred during the boot where it has a known end, by default"
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
    "LOADSCAN_GC" => ["later", /LOADSCAN_GC="later" is not auto, on or off; using the default \(auto\)/, :gc, :auto],
    "LOADSCAN_VALIDATE" => ["digest", /LOADSCAN_VALIDATE "digest" is not one of mtime, listing/, :validate, "mtime"],
    "LOADSCAN_CACHE_DIR" => ["relative/dir", /LOADSCAN_CACHE_DIR "relative\/dir" is not an absolute path/, :cache_dir, nil],
    "LOADSCAN_READ_ONLY" => ["1", /LOADSCAN_READ_ONLY is not a loadscan setting \(did you mean LOADSCAN_READONLY\?\)/, :readonly, false],
    "LOADSCAN_IGNORE_DIRS" => ["vendor/x", /LOADSCAN_IGNORE_DIRS "vendor\/x" is neither a directory name nor an absolute path/,
                               :ignore_names, []],
  }.freeze

  def test_each_bad_value_is_one_problem_and_the_default_applies
    BAD.each do |name, (value, message, attribute, default)|
      env = { name => value, "HOME" => Dir.tmpdir } # a home: the default cache dir is one
      c = Loadscan::Config.new(env: name == "LOADSCAN_CACHE_DIR" ? env : { "LOADSCAN_CACHE_DIR" => "/tmp/c" }.merge(env))
      assert_equal 1, c.problems.size, "#{name}: #{c.problems.inspect}"
      assert_match message, c.problems.first
      expected = default.nil? ? Loadscan::Config.new(env: { "HOME" => Dir.tmpdir }).cache_dir : default
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

  # A user without a home (HOME unset, empty or `/`, as daemons and `env -i` run) and without
  # XDG_CACHE_HOME has no cache dir, as documented: never `/.cache` (which root would create
  # and anyone else be warned about on every run). Real boots as nobody, like stock's.
  def test_no_home_means_no_cache
    with_files([["e/a.rb", "$log << :a"]]) do |dir|
      File.chmod(0o755, dir)
      code = "$LOAD_PATH.unshift(#{"#{dir}/e".inspect}); $log = []; require 'a'; " \
             "report('log' => $log, 'cache_dir' => defined?(Loadscan) && Loadscan.config.cache_dir)"
      [nil, "", "/", "//"].each do |home|
        env = { "HOME" => home, "XDG_CACHE_HOME" => nil, "LOADSCAN_CACHE_DIR" => nil, "BUNDLE_GEMFILE" => nil }
        _, fast = assert_same_as_stock(code, env: env, as_nobody: true, only: %w[log])
        assert_nil fast.report["cache_dir"], "HOME=#{home.inspect}: no cache dir"
      end
      Dir.mktmpdir do |home|
        assert Loadscan::Config.new(env: { "HOME" => home }).cache_dir.start_with?("#{home}/.cache/loadscan/"), "a real home still has one"
      end
      assert_nil Loadscan::Config.new(env: { "HOME" => "/" }).cache_dir, "root's HOME=/ (a container) neither"
    end
  end

  FLAG_VARIABLES = { "LOADSCAN_DISABLE" => [:enabled, true, true], "LOADSCAN_READONLY" => [:readonly, false, false],
                     "LOADSCAN_LAZY" => [:lazy, true, false], "LOADSCAN_STATS" => [:stats, false, false] }.freeze

  # Each flag variable, each spelling, in any case and with spaces around; a bad value is one
  # problem naming the variable and the value, and the default applies.
  def test_every_flag_variable_and_spelling
    FLAG_VARIABLES.each do |name, (attribute, default, inverted)|
      # The spellings the README and config.rb's header document (not FLAGS itself: a spelling
      # dropped from it must fail here).
      { "1" => true, "true" => true, "yes" => true, "on" => true, "0" => false, "false" => false, "no" => false,
        "off" => false }.each do |spelling, on|
        [spelling, spelling.upcase, " #{spelling.capitalize}\t"].each do |value|
          c = config({ name => value })
          assert_equal inverted ? !on : on, c.public_send(attribute), "#{name}=#{value.inspect}"
          assert_empty c.problems, "#{name}=#{value.inspect}"
        end
      end
      ["", "  "].each { |blank| assert_equal default, config({ name => blank }).public_send(attribute), "#{name} blank" }
      %w[2 enabled y].each do |bad|
        c = config({ name => bad })
        assert_equal default, c.public_send(attribute), "#{name}=#{bad}"
        assert_equal ["#{name}=#{bad.inspect} is not a flag (use 1/0, true/false, yes/no, on/off); using the default " \
                      "(#{(inverted ? !default : default) ? "on" : "off"})"], c.problems
      end
    end
  end

  # LOADSCAN_GC: auto (the default, blank too), or a flag in any of its spellings; anything else is
  # one problem and auto.
  def test_gc_setting
    ["auto", " AUTO ", "", "  "].each { |v| assert_equal [:auto, []], [config({ "LOADSCAN_GC" => v }).gc, config({ "LOADSCAN_GC" => v }).problems], v }
    { "1" => true, "on" => true, "Yes" => true, " TRUE\t" => true, "0" => false, "off" => false, "No" => false, "false" => false }.each do |v, on|
      c = config({ "LOADSCAN_GC" => v })
      assert_equal [on, []], [c.gc, c.problems], v.inspect
    end
    c = config({ "LOADSCAN_GC" => "2" })
    assert_equal [:auto, ['LOADSCAN_GC="2" is not auto, on or off; using the default (auto)']], [c.gc, c.problems]
  end

  def test_cache_flag_turns_the_cache_off_whatever_the_dir
    assert_nil config({ "LOADSCAN_CACHE" => "0" }).cache_dir
    assert_nil config({ "LOADSCAN_CACHE" => "Off", "LOADSCAN_CACHE_DIR" => "relative" }).cache_dir
    assert_empty config({ "LOADSCAN_CACHE" => "no", "LOADSCAN_CACHE_DIR" => "relative" }).problems, "the dir is not read"
    assert_equal "/tmp/c", config({ "LOADSCAN_CACHE" => "1" }).cache_dir
    c = config({ "LOADSCAN_CACHE" => "sometimes" })
    assert_equal "/tmp/c", c.cache_dir
    assert_match(/\ALOADSCAN_CACHE="sometimes" is not a flag .*using the default \(on\)\z/, only_problem(c))
  end

  def test_keywords_win_over_the_environment
    env = { "LOADSCAN_DISABLE" => "1", "LOADSCAN_READONLY" => "0", "LOADSCAN_LAZY" => "1", "LOADSCAN_THREADS" => "7",
            "LOADSCAN_VALIDATE" => "mtime", "LOADSCAN_STATS" => "0", "LOADSCAN_CACHE_DIR" => "/tmp/env", "LOADSCAN_GC" => "on" }
    c = Loadscan::Config.new(env: env, enabled: true, readonly: true, lazy: false, threads: 2, validate: "Listing",
                             stats: true, cache_dir: "/tmp/kw/../kw2", stable_dirs: ["/nowhere"], gc: false)
    assert_equal [true, true, false, 2, "listing", true, "/tmp/kw2", false],
                 [c.enabled, c.readonly, c.lazy, c.threads, c.validate, c.stats, c.cache_dir, c.gc]
    assert_empty c.problems
    assert_nil Loadscan::Config.new(env: env, cache: false).cache_dir
  end

  def test_bad_keywords_are_named_as_keywords
    c = Loadscan::Config.new(env: {}, threads: "many", validate: "sha", cache_dir: "rel")
    assert_equal 0, c.threads
    assert_equal "mtime", c.validate
    assert_equal 3, c.problems.size, c.problems.inspect
    assert_match(/\Athreads: "many" is not a whole number/, c.problems[0])
    assert_match(/\Avalidate: "sha" is not one of mtime, listing; using mtime\z/, c.problems[1])
    assert_match(/\Acache_dir: "rel" is not an absolute path; using the default\z/, c.problems[2])
  end

  def test_threads
    {
      " 4 " => [4, nil], "0" => [0, nil], "64" => [64, nil], "" => [0, nil],
      "65" => [64, /LOADSCAN_THREADS "65" is more threads than a scan can use; using 64/],
      "-1" => [0, /LOADSCAN_THREADS "-1" is negative \(use 0 for automatic, or a count up to 64\); using automatic/],
      "0x10" => [0, /LOADSCAN_THREADS "0x10" is not a whole number/], "1.5" => [0, /"1.5" is not a whole number/],
    }.each do |value, (threads, message)|
      c = config({ "LOADSCAN_THREADS" => value })
      assert_equal threads, c.threads, value.inspect
      if message
        assert_match message, only_problem(c), value.inspect
      else
        assert_empty c.problems, value.inspect
      end
    end
  end

  def test_validate
    assert_equal "listing", config({ "LOADSCAN_VALIDATE" => " Listing " }).validate
    assert_equal "mtime", config({ "LOADSCAN_VALIDATE" => "MTIME" }).validate
    assert_equal "mtime", config({ "LOADSCAN_VALIDATE" => "" }).validate
    assert_empty config({ "LOADSCAN_VALIDATE" => "" }).problems
  end

  # On CI (CI set to anything but a false flag) listing is the default; the setting still rules.
  def test_validate_by_listing_on_ci
    { "true" => "listing", "1" => "listing", "woodpecker" => "listing", " TRUE " => "listing",
      "false" => "mtime", "0" => "mtime", "" => "mtime" }.each do |ci, validate|
      c = config({ "CI" => ci })
      assert_equal validate, c.validate, "CI=#{ci.inspect}"
      assert_empty c.problems
    end
    assert_equal "mtime", config({ "CI" => "true", "LOADSCAN_VALIDATE" => "mtime" }).validate
    assert_equal "mtime", config({ "CI" => "true" }, validate: "mtime").validate
    c = config({ "CI" => "true", "LOADSCAN_VALIDATE" => "digest" })
    assert_equal ["LOADSCAN_VALIDATE \"digest\" is not one of listing, mtime; using listing"], c.problems
  end

  def test_cache_dir_must_be_absolute
    assert_equal "/tmp/b", config({ "LOADSCAN_CACHE_DIR" => "/tmp/a/../b" }).cache_dir
    ["", "tmp/cache", "./cache", "~/cache"].each do |value|
      c = Loadscan::Config.new(env: { "LOADSCAN_CACHE_DIR" => value, "HOME" => "/nonexistent/home" })
      assert_equal ["LOADSCAN_CACHE_DIR #{value.inspect} is not an absolute path; using the default"], c.problems
      refute_equal File.expand_path(value), c.cache_dir, "never the cwd"
    end
  end

  def test_stable_dirs_are_added_by_realpath_and_missing_ones_dropped
    with_files([["gems/x.rb", ""], ["vendor", :symlink, "gems"]]) do |dir|
      c = config({ "LOADSCAN_STABLE_DIRS" => "#{dir}/vendor:#{dir}/missing::#{dir}/gems" })
      assert_empty c.problems
      assert_includes c.stable_dirs, "#{dir}/gems"
      refute(c.stable_dirs.any? { |d| d.start_with?("#{dir}/missing") || d == "#{dir}/vendor" })
      assert_equal c.stable_dirs.uniq, c.stable_dirs
      assert_equal ["#{dir}/gems"], config(stable_dirs: ["#{dir}/vendor"]).stable_dirs.select { |d| d.start_with?(dir) }
    end
  end

  def test_unknown_variables_are_named_with_a_guess
    c = config({ "LOADSCAN_TREADS" => "4", "LOADSCAN_CACHEDIR" => "/x", "LOADSCAN_SOMETHING_ELSE" => "1",
                 "LOADSCAN_TEST_ANYTHING" => "1", "NOT_LOADSCAN_LAZY" => "0", "loadscan_lazy" => "0",
                 "LOADSCAN_GEM_CACHE" => "/x", "LOADSCAN_CARGO_CACHE" => "off" })
    known = Loadscan::Config::KNOWN.join(", ")
    assert_equal ["LOADSCAN_TREADS is not a loadscan setting (did you mean LOADSCAN_THREADS?); known: #{known}",
                  "LOADSCAN_CACHEDIR is not a loadscan setting (did you mean LOADSCAN_CACHE_DIR?); known: #{known}",
                  "LOADSCAN_SOMETHING_ELSE is not a loadscan setting; known: #{known}"], c.problems
    assert c.lazy, "an unknown variable sets nothing"
  end

  # Ruby's spell checker, asked about the part after LOADSCAN_ (which every name shares, and
  # which made an edit distance over whole names suggest LOADSCAN_DISABLE for LOADSCAN_STABLE).
  def test_the_guess_is_rubys_spell_checker_on_the_setting_name
    { "LOADSCAN_STABLE" => "LOADSCAN_STABLE_DIRS", "LOADSCAN_IGNORE" => "LOADSCAN_IGNORE_DIRS",
      "LOADSCAN_CACHE_PATH" => "LOADSCAN_CACHE_DIR", "LOADSCAN_DISABLED" => "LOADSCAN_DISABLE",
      "LOADSCAN_X" => nil }.each do |name, guess|
      hint = guess ? " (did you mean #{guess}?)" : ";"
      assert_includes only_problem(config({ name => "1" })), "#{name} is not a loadscan setting#{hint}"
    end
  end

  # The spell checker is loaded only for a misspelling, and alone: a Ruby run with
  # --disable-did_you_mean keeps its NameError messages bare. A Ruby that cannot load it (its
  # library dir off the load path) still names the variable, without a guess.
  def test_the_guess_without_did_you_mean
    code = <<~RUBY
      require "rbconfig"
      $LOAD_PATH.delete(RbConfig::CONFIG["rubylibdir"]) if ENV["NO_LIB"]
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/config").inspect}
      before = $LOADED_FEATURES.grep(/did_you_mean/).size
      quiet = Loadscan::Config.new(env: { "LOADSCAN_CACHE_DIR" => "/tmp/c" })
      loaded = $LOADED_FEATURES.grep(/did_you_mean/).size - before
      typo = Loadscan::Config.new(env: { "LOADSCAN_CACHE_DIR" => "/tmp/c", "LOADSCAN_TREADS" => "1" })
      name_error = begin; undefined_locall; rescue NameError => e; e.message; end
      report("loaded" => loaded, "problems" => quiet.problems + typo.problems, "name_error" => name_error)
    RUBY
    run = run_ruby(code, ruby_opts: ["--disable-did_you_mean"])
    assert run.success?, run.stderr
    assert_equal 0, run.report["loaded"], "did_you_mean loaded without a misspelling"
    assert_equal 1, run.report["problems"].size
    assert_includes run.report["problems"].first, "(did you mean LOADSCAN_THREADS?)"
    refute_includes run.report["name_error"], "Did you mean"
    run = run_ruby(code, ruby_opts: %w[--disable-did_you_mean --disable-gems], env: { "NO_LIB" => "1" })
    assert run.success?, run.stderr
    assert_equal ["LOADSCAN_TREADS is not a loadscan setting; known: #{Loadscan::Config::KNOWN.join(", ")}"],
                 run.report["problems"]
  end

  def test_several_bad_values_are_one_problem_each
    c = config({ "LOADSCAN_LAZY" => "x", "LOADSCAN_THREADS" => "y", "LOADSCAN_VALIDATE" => "z", "LOADSCAN_READ_ONLY" => "1" })
    assert_equal 4, c.problems.size, c.problems.inspect
    assert_equal c.problems.uniq, c.problems
  end

  def test_ignore_dirs_names_paths_and_default
    assert_equal [%w[node_modules], []], [config.ignore_names, config.ignore_paths]
    none = config({ "LOADSCAN_IGNORE_DIRS" => "" })
    assert_equal [[], []], [none.ignore_names, none.ignore_paths]
    Dir.mktmpdir do |dir|
      c = config({ "LOADSCAN_IGNORE_DIRS" => "vendor: tmp :#{dir}/../#{File.basename(dir)}:#{dir}/none:a/b:." })
      assert_equal %w[vendor tmp], c.ignore_names
      assert_equal [File.realpath(dir), "#{File.realpath(dir)}/none"], c.ignore_paths
      assert_equal ['LOADSCAN_IGNORE_DIRS "a/b" is neither a directory name nor an absolute path; not ignored',
                    'LOADSCAN_IGNORE_DIRS "." is neither a directory name nor an absolute path; not ignored'], c.problems
    end
    assert_equal %w[x], config(ignore_dirs: %w[x]).ignore_names
  end

  def test_env_key_names_this_loadscan_and_ruby
    key = config.env_key
    assert_includes key, Loadscan::VERSION
    assert_includes key, RUBY_REVISION.to_s
    assert_includes key, RUBY_PLATFORM
    assert_includes key, " #{RbConfig::CONFIG["DLEXT"]} ", key
    # The directories ignored are part of it: a cache listed with others is not used.
    assert key.end_with?(" ignore=node_modules"), key
    refute_equal key, config({ "LOADSCAN_IGNORE_DIRS" => "vendor" }).env_key
  end

  # The same in real boots: each bad value, set alone, boots exactly like stock Ruby with
  # exactly one warning, which names the setting.
  def test_bad_values_boot_like_stock_with_one_warning
    with_files([["e/a.rb", "$log << :a"]]) do |dir|
      code = "$LOAD_PATH.unshift(#{"#{dir}/e".inspect}); $log = []; require 'a'; report('log' => $log, 'r' => require('a'))"
      BAD.each do |name, (value, message, _, _)|
        # HOME in the test's dir: a bad LOADSCAN_CACHE_DIR falls back to the user's cache dir.
        env = { name => value, "HOME" => "#{dir}/home", "XDG_CACHE_HOME" => nil }
        _, fast = assert_same_as_stock(code, env: env, quiet: false)
        warnings = fast.stderr.lines.grep(/loadscan/)
        assert_equal 1, warnings.size, "#{name}=#{value}: #{fast.stderr}"
        assert_match message, warnings.first
      end
    end
  end
end
