# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/entry"

# Ruby code that runs while loadscan holds its state: an entry's `to_path` (ENTRY) that changes
# `$LOAD_PATH`, raises, kills its thread, throws or gets a signal. Each case is compared with stock
# Ruby in a separate process.
class ToPathTest < Minitest::Test
  ENTRY = Loadscan::TestSupport::ENTRY

  def test_to_path_shrinking_load_path_does_not_crash
    with_files([["a/shrunk.rb", "$loaded = :a"]]) do |dir|
      code = ENTRY + <<~RUBY
        keep = #{"#{dir}/a".inspect}
        fillers = (1..64).map { |i| "#{dir}/none\#{i}" }
        $LOAD_PATH.unshift(Entry.new(keep) { $LOAD_PATH.replace([$LOAD_PATH.first]); GC.start }, *fillers)
        r = require "shrunk"
        report("r" => r, "loaded" => $loaded, "load_path" => $LOAD_PATH.size)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_exception_from_to_path_is_raised_not_swallowed
    with_files([["a/once.rb", "$loaded = :a"]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.unshift(Entry.new(#{"#{dir}/a".inspect}) { raise ArgumentError, "from to_path" })
        r = begin; require "once"; rescue ArgumentError => e; e.message; end
        report("r" => r, "loaded" => $loaded)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_thread_kill_and_throw_in_to_path_are_not_swallowed
    with_files([["a/once.rb", "$loaded = true"]]) do |dir|
      code = ENTRY + <<~RUBY
        a = #{"#{dir}/a".inspect}
        out = {}
        Thread.new do
          $LOAD_PATH.unshift(Entry.new(a) { Thread.current.kill })
          require "once"
          out[:after_kill] = true
        end.join
        $LOAD_PATH.shift
        out[:caught] = catch(:stop) do
          $LOAD_PATH.unshift(Entry.new(a) { throw :stop, :thrown })
          require "once"
          :not_thrown
        end
        report(out)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_signal_during_to_path_terminates_as_in_stock
    with_files([["a/once.rb", ""]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.unshift(Entry.new(#{"#{dir}/a".inspect}) { Process.kill(:TERM, Process.pid); sleep 5 })
        require "once"
        report("survived" => true)
      RUBY
      stock = run_ruby(code, loadscan: false)
      fast = run_ruby(code, loadscan: true)
      assert_equal Signal.list["TERM"], stock.status.termsig, stock.inspect
      assert_equal stock.status.termsig, fast.status.termsig, fast.stderr
      assert_nil fast.report
    end
  end
end
