# frozen_string_literal: true

require_relative "../test_helper"

# Interrupts that arrive while a require lists a directory: raised where stock Ruby raises them,
# and loadscan keeps working.
class InterruptTest < Minitest::Test
  # An interrupt that arrives while a require scans (here one queued for the next blocking
  # point, so that it is deterministic) is raised where stock Ruby raises it, and loadscan keeps
  # working. Where that is differs: 3.1 to 3.4 reach a blocking point inside `require` before the
  # file loads; 4.0 reaches none, loads the file and raises as the block ends. loadscan's lookup
  # (which lists the root with the GVL released) adds no blocking point of its own.
  def test_interrupt_during_scan_keeps_loadscan_working
    with_files([["a/first.rb", "$first = true"], ["a/second.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        raised = begin
          Thread.handle_interrupt(RuntimeError => :on_blocking) do
            Thread.current.raise "interrupted"
            require "first"
            :no
          end
        rescue RuntimeError => e
          e.message
        end
        second = require "second"
        stats = defined?(Loadscan) ? Loadscan.stats : {}
        report("raised" => raised, "first" => $first == true, "second" => second, "stats_alive" => !stats.nil?,
               "hits" => stats&.dig(:hits), "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, fast = run_both(code)
      assert_equal "interrupted", fast.report["raised"]
      assert_equal stock.report["first"], fast.report["first"], "first.rb loaded (or not) before the interrupt as with stock Ruby"
      assert_equal stock.report["second"], fast.report["second"]
      assert fast.report["stats_alive"], "loadscan stopped after the interrupt"
      assert_operator fast.report["hits"], :>=, 1, "the next require was not answered"
      assert_same_loaded_features(stock.report["loaded_features"], fast.report["loaded_features"])
    end
  end

  # White-box: listing a deferred directory is a blocking region (the GVL is released around
  # it), so an interrupt queued for the next blocking point is raised by the lookup itself.
  def test_lazy_listing_releases_the_gvl
    with_files([["a/top.rb", ""], ["a/deep/er/x.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        Loadscan.lookup("top") # lists the root, defers deep/
        inside = nil
        begin
          Thread.handle_interrupt(RuntimeError => :on_blocking) do
            Thread.current.raise "interrupted"
            Loadscan.lookup("deep/er/x")
            inside = :not_raised
          end
        rescue RuntimeError
        end
        report("inside" => inside, "answer" => Loadscan.lookup("deep/er/x"),
               "listed" => Loadscan.stats[:dirs_listed_lazily])
      RUBY
      fast = run_ruby(code, loadscan: true)
      assert fast.status.success?, fast.stderr
      assert_nil fast.report["inside"], "the lazy listing held the GVL"
      assert_equal "#{dir}/a/deep/er/x.rb", fast.report["answer"]
    end
  end
end
