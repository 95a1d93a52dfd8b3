# frozen_string_literal: true

require_relative "../test_helper"

# Every warning loadscan prints goes through Loadscan::Warnings: "loadscan: " and the message,
# with no file:line, each kind at most once per process. Each test loads lib/loadscan/warnings.rb
# afresh into a module of its own, so what one test said does not silence another.
class WarningsTest < Minitest::Test
  FILE = File.join(Loadscan::TestSupport::LIB, "loadscan", "warnings.rb")

  def setup
    wrap = Module.new
    load FILE, wrap
    @warnings = wrap::Loadscan::Warnings
  end

  def test_once_warns_with_the_prefix_and_no_location
    assert_warns(/\Aloadscan: the cache is odd\n\z/) { @warnings.once(:cache, "the cache is odd") }
  end

  def test_each_kind_warns_once_per_process
    assert_warns(/\Aloadscan: first\n\z/) do
      assert_nil @warnings.once(:cache, "first")
      assert_nil @warnings.once(:cache, "second, same kind")
    end
    assert_warns(/\Aloadscan: another kind\n\z/) { @warnings.once(:native, "another kind") }
    assert_warns(/./, count: 0) { @warnings.once(:native, "again") }
  end

  # Config problems are warned with the message as their kind: two different problems are two
  # warnings, the same problem twice is one.
  def test_messages_as_kinds
    assert_warns(/\Aloadscan: LOADSCAN_(LAZY|STATS) is bad\n\z/, count: 2) do
      ["LOADSCAN_LAZY is bad", "LOADSCAN_STATS is bad", "LOADSCAN_LAZY is bad"].each { |m| @warnings.once(m, m) }
    end
  end

  def test_dangling_symlinks_are_quiet
    assert_warns(/./, count: 0) do
      @warnings.scan_problems([])
      @warnings.scan_problems([[:dangling, "a/gone -> nowhere"], [:dangling, "b/gone -> nowhere"]])
    end
    # Quiet ones did not use up the kind.
    assert_warns(/\Aloadscan: left to Ruby's require: a\/loop: symlink loop\n\z/) do
      @warnings.scan_problems([[:dangling, "a/gone"], [:loop, "a/loop: symlink loop"]])
    end
  end

  def test_scan_problems_show_three_and_count_the_rest_once
    problems = (1..5).map { |i| [:unreadable, "d#{i} unreadable"] }
    expected = "loadscan: left to Ruby's require: d1 unreadable; d2 unreadable; d3 unreadable " \
               "and 2 more (Loadscan.problems lists them)\n"
    assert_warns(/\A#{Regexp.escape(expected)}\z/) { @warnings.scan_problems(problems) }
    assert_warns(/./, count: 0) { @warnings.scan_problems([[:loop, "later loop"]]) }
  end

  def test_three_problems_are_all_shown
    problems = [[:loop, "l"], [:unreadable, "u"], [:too_big, "t"]]
    assert_warns(/\Aloadscan: left to Ruby's require: l; u; t\n\z/) { @warnings.scan_problems(problems) }
  end

  # Under `ruby -W0` Kernel#warn says nothing: loadscan's warnings obey it like Ruby's own.
  def test_silenced_by_w0
    verbose = $VERBOSE
    $VERBOSE = nil
    assert_warns(/./, count: 0) { @warnings.once(:cache, "hushed") }
  ensure
    $VERBOSE = verbose
  end
end
