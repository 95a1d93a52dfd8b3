# frozen_string_literal: true

module Loadscan
  module TestSupport
    # Boots a generated fixture's boot.rb (see fixtures/README.md: loadscan comes in through its
    # BOOT_PRELUDE hook, the report goes to BOOT_REPORT) with RubyProcess.
    module BootFixture
      # One boot, stock or with loadscan; it must succeed and report.
      def boot_fixture(boot_rb, loadscan:, env: {})
        run_ruby!(file: boot_rb, loadscan: loadscan, env: env, timeout: 600, prelude_var: "BOOT_PRELUDE", report_var: "BOOT_REPORT")
      end

      # Boots stock and with loadscan; asserts the same results and $LOADED_FEATURES.
      # Boots cold (fresh cache dir) and then warm (the cache the cold boot wrote); both must
      # equal the stock boot. Returns stock's report, the warm report with loadscan's stats at
      # exit (how many requires its index answered), and the warm boot's stderr.
      def assert_boots_like_stock(boot_rb, env: {})
        stock = boot_fixture(boot_rb, loadscan: false, env: env)
        Dir.mktmpdir("loadscan-cache") do |cache|
          env = { "LOADSCAN_CACHE_DIR" => cache }.merge(env)
          %w[cold warm].map do |state|
            fast = boot_fixture(boot_rb, loadscan: true, env: env)
            assert_same_run stock, fast, "#{state} boot", only: %w[results log], quiet: false
            refute_nil fast.stats, "#{state} boot: loadscan was not active"
            [stock.report, fast.report.merge("stats" => fast.stats), fast.stderr]
          end.last
        end
      end
    end
  end
end
