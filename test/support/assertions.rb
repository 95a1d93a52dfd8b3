# frozen_string_literal: true

module Loadscan
  module TestSupport
    module Assertions
      # Same $LOADED_FEATURES, leaving out loadscan's own files. On a difference the message
      # names what only one side loaded (or the first place the order differs), not the
      # thousand-line arrays.
      # (A Gemfile that names loadscan makes Bundler load some of them in the stock run too.)
      def assert_same_loaded_features(stock, fast, msg = nil)
        stock = stock.reject { |f| own_feature?(f) }
        ours = fast.reject { |f| own_feature?(f) }
        return pass if stock == ours

        only_stock = stock - ours
        only_ours = ours - stock
        first = stock.each_index.find { |i| stock[i] != ours[i] }
        flunk [msg, "$LOADED_FEATURES differ (#{stock.size} stock, #{ours.size} with loadscan)",
               "only stock: #{only_stock.first(10)}", "only with loadscan: #{only_ours.first(10)}",
               "first difference at #{first}: #{stock[first].inspect} vs #{ours[first].inspect}"].compact.join("\n")
      end

      # Runs code under stock Ruby and under loadscan; the code must `report` a Hash. Asserts the
      # reports are equal once loadscan's own files are left out of "loaded_features".
      def assert_same_as_stock(code, **opts)
        stock, fast = run_both(code, **opts)
        refute_nil stock.report, "stock run reported nothing:\n#{stock.stderr}"
        s = stock.report.dup
        f = fast.report.dup
        if s.key?("loaded_features")
          assert_same_loaded_features(s.delete("loaded_features"), f.delete("loaded_features"))
        end
        assert_equal s, f
        assert_empty fast.stderr.lines.grep(/loadscan/), "loadscan warned:\n#{fast.stderr}"
        [stock, fast]
      end
    end
  end
end
