# frozen_string_literal: true

module Loadscan
  module TestSupport
    module Assertions
      # A fraction of the requires that search $LOAD_PATH the index must answer in a real boot
      # (measured: 99% and more; the rest are optional requires of missing features and `./` paths).
      MIN_ANSWERED = 0.9
      # At most this fraction of a stock boot's failed openat (the issue's bound).
      MAX_FAILED_OPENS = 0.1

      # loadscan's figures at the end of a real boot that loaded `features` features: active,
      # engaged, answering most requires that searched, and most features coming through the index.
      def assert_answered(stats, features, label)
        refute_nil stats, "#{label}: loadscan not active"
        assert stats[:engaged], "#{label}: require does not reach loadscan"
        answered = stats[:hits] + stats[:misses]
        searching = answered + stats[:left_to_ruby].values_at(:unsure_miss, :blind_spot, :loaded, :unavailable).sum
        assert_operator answered, :>=, MIN_ANSWERED * searching, "#{label}: #{stats.inspect}"
        assert_operator stats[:hits], :>=, features / 2, "#{label}: #{stats[:hits]} hits for #{features} features"
      end

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
        # (When one list is the other plus more at its end, the difference starts where the shorter ends.)
        first = stock.each_index.find { |i| stock[i] != ours[i] } || stock.size
        flunk [msg, "$LOADED_FEATURES differ (#{stock.size} stock, #{ours.size} with loadscan)",
               "only stock: #{only_stock.first(10)}", "only with loadscan: #{only_ours.first(10)}",
               "first difference at #{first}: #{stock[first].inspect} vs #{ours[first].inspect}"].compact.join("\n")
      end

      # The assertion "same as stock" for two Results of RubyProcess (stock's and loadscan's):
      # equal reports, once loadscan's own files are left out of "loaded_features" and its
      # "stats" left out (`only:` compares those keys, besides "loaded_features"); and with
      # `quiet: true` the same stderr as stock's (no warning of loadscan's, Ruby's own the same).
      # A test that expects loadscan to warn passes `quiet: false` and checks the warning itself.
      def assert_same_run(stock, fast, msg = nil, quiet: true, only: nil)
        label = msg ? "#{msg}: " : ""
        refute_nil stock.report, "#{label}stock run reported nothing:\n#{stock.stderr}"
        refute_nil fast.report, "#{label}loadscan run reported nothing:\n#{fast.stderr}"
        s = stock.report
        f = fast.report
        if s.is_a?(Hash) && f.is_a?(Hash)
          s = s.except("stats")
          f = f.except("stats")
          if s.key?("loaded_features") || f.key?("loaded_features")
            assert_same_loaded_features(s.delete("loaded_features"), f.delete("loaded_features"), msg)
          end
          s, f = s.slice(*only), f.slice(*only) if only
        end
        assert_equal s, f, msg
        return unless quiet

        assert_equal stock.stderr_normalized, fast.stderr_normalized, "#{label}stderr differs from stock's"
      end

      # Runs `code` (or `file:`/`command:`, see RubyProcess) stock and with loadscan, asserts the
      # runs are the same (assert_same_run) and returns both Results.
      def assert_same_as_stock(code = nil, quiet: true, only: nil, **opts)
        stock, fast = run_both(code, **opts)
        assert_same_run(stock, fast, quiet: quiet, only: only)
        [stock, fast]
      end

      # assert_same_as_stock with the loadscan run on the cache dir `cache` (`loadscan_env` added
      # to its environment only), so that a run reads what the one before wrote; returns
      # loadscan's Result.
      #
      #   cold = assert_same_as_stock_with_cache(require_script(lp, %w[a b]), cache)
      #   warm = assert_same_as_stock_with_cache(require_script(lp, %w[a b]), cache, loadscan_env: { "LOADSCAN_READONLY" => "1" })
      #   assert_operator warm.report["stats"][:roots_from_cache], :>=, 1
      def assert_same_as_stock_with_cache(code, cache, loadscan_env: {}, **opts)
        assert_same_as_stock(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => cache }.merge(loadscan_env), **opts)[1]
      end

      # run_ruby for a process that must succeed: asserts it did, returns its Result.
      #
      #   report = run_ruby!(file: File.join(app, "config", "boot.rb"), chdir: app).report
      def run_ruby!(code = nil, **opts)
        run = run_ruby(code, **opts)
        what = opts[:file] || opts[:command]&.join(" ") || "the script"
        mode = { false => " stock", true => " with loadscan" }[opts[:loadscan]]
        assert run.success?, "#{what} failed#{mode} (#{run.status.inspect}):\n#{run.stderr}"
        run
      end
    end
  end
end
