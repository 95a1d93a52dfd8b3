# frozen_string_literal: true

require_relative "../test_helper"

# Ruby 4.0's boxes (`RUBY_BOX=1`): each `Ruby::Box` has its own `$LOAD_PATH` and
# `$LOADED_FEATURES`, which loadscan's one index does not follow, so loadscan stays off with one
# warning saying why, and every require is Ruby's. 4.0 is not here: this tests the variable
# (what a Ruby without `Ruby::Box.enabled?` is asked); on 4.0 `Ruby::Box.enabled?` decides.
class RubyBoxTest < Minitest::Test
  def test_box_mode_keeps_loadscan_off_with_one_warning
    with_files([["a/boxed.rb", "$boxed = 1"]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        r = [require("boxed"), begin; require("box_missing"); rescue LoadError => e; e.message; end]
        report("r" => r, "loaded_features" => $LOADED_FEATURES.dup,
               "active" => defined?(Loadscan) ? [Loadscan.active?, Loadscan.engaged?, Loadscan::Native.probes] : [false, false, 0])
      RUBY
      stock, fast = assert_same_as_stock(code, quiet: false, env: { "RUBY_BOX" => "1" })
      assert_equal [false, false, 0], fast.report["active"]
      warnings = fast.stderr.lines.grep(/loadscan:/)
      assert_equal 1, warnings.size, fast.stderr
      assert_match(/Ruby::Box is enabled \(RUBY_BOX=1\): each box has its own \$LOAD_PATH and \$LOADED_FEATURES/, warnings.first)
      assert_equal stock.stderr, fast.stderr.sub(warnings.first, "")
    end
  end

  def test_without_box_mode_loadscan_is_on
    run = run_ruby("report([Loadscan.active?, Loadscan.engaged?])", loadscan: true, env: { "RUBY_BOX" => "0" })
    assert_equal [true, true], run.report, run.stderr
    assert_empty run.stderr
  end
end
