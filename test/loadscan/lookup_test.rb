# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../fixtures/random_tree"

# The backbone: on seeded random trees (shadowing, .rb/.so pairs, symlinks, loops, non-ASCII
# names, odd entries), every answer the index gives equals `$LOAD_PATH.resolve_feature_path`,
# and a boot that requires every feature ends exactly like a stock boot.
class LookupTest < Minitest::Test
  SEEDS = (ENV["LOADSCAN_SEEDS"] || "1-8").then { |s| s.include?("-") ? Range.new(*s.split("-").map(&:to_i)) : s.split(",").map(&:to_i) }

  def tree(seed)
    out = File.join(Loadscan::TestSupport::ROOT, "tmp", "test-trees", "random-#{seed}")
    [out, Fixtures::RandomTree.generate(out: out, seed: seed)]
  end

  def compare_code(load_path, features)
    <<~RUBY
      $LOAD_PATH.unshift(*#{load_path.inspect})
      rows = #{features.inspect}.map do |f|
        oracle = begin
          $LOAD_PATH.resolve_feature_path(f)&.last
        rescue LoadError, TypeError, ArgumentError => e
          e.class.name
        end
        [f, Loadscan.lookup(f), oracle]
      end
      report("rows" => rows, "active" => Loadscan.active?)
    RUBY
  end

  SEEDS.each do |seed|
    define_method(:"test_lookup_equals_resolve_feature_path_seed_#{seed}") do
      _, manifest = tree(seed)
      run = run_ruby(compare_code(manifest[:load_path], manifest[:features]), loadscan: true)
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
    end

    define_method(:"test_boot_requires_like_stock_seed_#{seed}") do
      out, = tree(seed)
      assert_boots_like_stock(File.join(out, "boot.rb"))
    end
  end
end
