# frozen_string_literal: true

module Loadscan
  module TestSupport
    # The program most differential tests run (with RubyProcess, stock and with loadscan): it
    # puts `load_path` in front of $LOAD_PATH, runs `setup` (Ruby code), requires each of
    # `features` and reports "results" (one row a feature: what `require` returned, or its
    # LoadError's class, message and path; with `resolve: true` what
    # `$LOAD_PATH.resolve_feature_path` answered first), "log" (what the loaded files appended
    # to `$log`), $LOADED_FEATURES, the load path and loadscan's stats (nil in a stock run).
    #
    #   stock, fast = assert_same_as_stock(require_script(%W[#{dir}/e1 #{dir}/e2], %w[a sub/b nope]))
    #   stock.report["results"]
    #   # => [["a", true], ["sub/b", true], ["nope", ["LoadError", "cannot load such file -- nope", "nope"]]]
    #
    # `setup` may append rows of its own to RESULTS (the features' rows follow).
    module RequireScript
      def require_script(load_path, features = [], setup: "", resolve: false)
        resolved = resolve ? "$LOAD_PATH.resolve_feature_path(f), " : ""
        <<~RUBY
          $log = []
          RESULTS = []
          $LOAD_PATH.unshift(*#{load_path.inspect})
          #{setup}
          #{features.inspect}.each do |f|
            RESULTS << [f, #{resolved}(begin; require(f); rescue LoadError => e; [e.class.name, e.message, e.path]; end)]
          end
          report("results" => RESULTS, "log" => $log, "loaded_features" => $LOADED_FEATURES.dup,
                 "load_path" => $LOAD_PATH.map(&:to_s), "stats" => (Loadscan.stats if defined?(Loadscan)))
        RUBY
      end
    end
  end
end
