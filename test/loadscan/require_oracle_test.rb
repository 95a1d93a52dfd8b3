# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../fixtures/random_tree"

# The differential require oracle, the backbone: on seeded random trees (shadowing, .rb/.so
# pairs, symlinks, loops, non-ASCII names, odd entries), every answer the index gives equals
# `$LOAD_PATH.resolve_feature_path`, and a boot that requires every feature ends exactly like a
# stock boot.
class RequireOracleTest < Minitest::Test
  SEEDS = (ENV["LOADSCAN_TEST_SEEDS"] || "1-8").then { |s| s.include?("-") ? Range.new(*s.split("-").map(&:to_i)) : s.split(",").map(&:to_i) }

  # The seed's tree, generated once per test in a fresh temp dir of its own, never regenerated
  # over a path an earlier tree used (reused inode numbers and mtimes made a cache look valid),
  # and never shared with another suite running at once on another Ruby.
  def tree(seed)
    @trees ||= {}
    @trees[seed] ||= begin
      out = File.join(File.realpath(Dir.mktmpdir("loadscan-trees")), "random-#{seed}")
      [out, Fixtures::RandomTree.generate(out: out, seed: seed)]
    end
  end

  def teardown
    @trees&.each_value { |out, _| FileUtils.rm_rf(File.dirname(out)) }
  end

  def compare_code(load_path, features)
    <<~RUBY
      at_setup = Loadscan.stats[:roots_scanned] # Ruby's own dirs, synced when loadscan set up
      $LOAD_PATH.unshift(*#{load_path.inspect})
      rows = #{features.inspect}.map do |f|
        oracle = begin
          Loadscan::CoreExt::LoadPath.ruby_resolve_feature_path(f)&.last # Ruby's own search
        rescue LoadError, TypeError, ArgumentError => e
          e.class.name
        end
        [f, Loadscan.lookup(f), oracle]
      end
      report("rows" => rows, "active" => Loadscan.active?, "stats" => Loadscan.stats, "scanned_at_setup" => at_setup)
    RUBY
  end

  SEEDS.each do |seed|
    define_method(:"test_lookup_equals_resolve_feature_path_seed_#{seed}") do
      check_lookup(seed, {})
    end

    # The same with every directory listed up front (LOADSCAN_LAZY=0) instead of on demand.
    define_method(:"test_lookup_equals_resolve_feature_path_full_scan_seed_#{seed}") do
      check_lookup(seed, { "LOADSCAN_LAZY" => "0" })
    end

    # A cache written by a boot that looked up half the features (so it holds only the
    # directories those needed) serves a second boot that looks up all of them: the
    # directories already listed come from the cache, the others are listed on demand.
    # What is asserted is the tree's roots: Ruby's own dirs, synced at setup, are stable roots
    # a change outside the test (or one made within RACY_NS of the first boot) rightly rescans.
    define_method(:"test_lookup_from_a_partial_lazy_cache_seed_#{seed}") do
      Dir.mktmpdir("loadscan-cache") do |cache|
        _, manifest = tree(seed)
        half = manifest[:features].each_slice(2).map(&:first)
        check_lookup(seed, { "LOADSCAN_CACHE_DIR" => cache }, features: half)
        assert File.file?(File.join(cache, "loadscan.cache"))
        stats = check_lookup(seed, { "LOADSCAN_CACHE_DIR" => cache })
        assert_equal 0, stats[:roots_scanned] - stats[:scanned_at_setup], "tree roots scanned again: #{stats.inspect}"
        stats = check_lookup(seed, { "LOADSCAN_CACHE_DIR" => cache }, features: half)
        assert_equal 0, stats[:dirs_listed_lazily], "the first boot's listings are in the cache: #{stats.inspect}"
      end
    end

    define_method(:"test_boot_requires_like_stock_seed_#{seed}") do
      out, = tree(seed)
      assert_boots_like_stock(File.join(out, "boot.rb"))
    end
  end

  # Looks up `features` (default: all of the tree's) in a loadscan process and compares each
  # answer with Ruby's; returns the process's `Loadscan.stats`, with `scanned_at_setup`: the
  # roots it had scanned before the tree was on its load path.
  def check_lookup(seed, env, features: nil)
    _, manifest = tree(seed)
    run = run_ruby(compare_code(manifest[:load_path], features || manifest[:features]), loadscan: true, env: env)
    assert run.status.success?, run.stderr
    assert run.report["active"]
    rows = run.report["rows"]
    answered = 0
    rows.each do |feature, ours, oracle|
      case ours
      when String
        answered += 1
        assert_equal oracle, ours, "feature #{feature.inspect}"
      when :missing
        assert_nil oracle, "feature #{feature.inspect}: loadscan says missing"
      end
    end
    # Most features must be answered by the index, or this test proves nothing.
    assert_operator answered, :>, rows.size / 3, "only #{answered} of #{rows.size} answered"
    run.report["stats"].merge(scanned_at_setup: run.report["scanned_at_setup"])
  end
end
