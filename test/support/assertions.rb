# frozen_string_literal: true

module Loadscan
  module TestSupport
    module Assertions
      # Same $LOADED_FEATURES, leaving out loadscan's own files.
      def assert_same_loaded_features(stock, fast, msg = nil)
        ours = fast.reject { |f| own_feature?(f) }
        assert_equal stock, ours, msg
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
