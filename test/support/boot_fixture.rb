# frozen_string_literal: true

require "open3"

module Loadscan
  module TestSupport
    # Boots a generated fixture's boot.rb (see fixtures/README.md) with a given prelude and
    # returns its Marshal'd report.
    module BootFixture
      SETUP = File.join(Loadscan::TestSupport::LIB, "loadscan/setup.rb")

      def boot_fixture(boot_rb, prelude: nil, env: {})
        Dir.mktmpdir("loadscan-boot") do |tmp|
          report = File.join(tmp, "boot.marshal")
          env = { "BOOT_REPORT" => report, "BOOT_PRELUDE" => prelude, "RUBYOPT" => nil, "RUBYLIB" => nil,
                  "LOADSCAN_CACHE_DIR" => File.join(tmp, "cache") }.merge(env)
          _, err, status = Open3.capture3(env, RbConfig.ruby, boot_rb)
          assert status.success?, "#{boot_rb} failed with prelude #{prelude.inspect}:\n#{err}"
          [Marshal.load(File.binread(report)), err] # rubocop:disable Security/MarshalLoad
        end
      end

      # Boots stock and with loadscan; asserts the same results and $LOADED_FEATURES.
      # Boots cold (fresh cache dir) and then warm (the cache the cold boot wrote); both must
      # equal the stock boot. Returns stock's report, the warm report with loadscan's stats at
      # exit (how many requires its index answered), and the warm boot's stderr.
      def assert_boots_like_stock(boot_rb, env: {})
        stock, = boot_fixture(boot_rb, env: env)
        Dir.mktmpdir("loadscan-prelude") do |tmp|
          stats = File.join(tmp, "stats.marshal")
          prelude = File.join(tmp, "prelude.rb")
          File.write(prelude, "load #{SETUP.inspect}\nat_exit { File.binwrite(#{stats.inspect}, Marshal.dump(Loadscan.stats)) }\n")
          env = { "LOADSCAN_CACHE_DIR" => File.join(tmp, "cache") }.merge(env)
          %w[cold warm].map do |state|
            fast, err = boot_fixture(boot_rb, prelude: prelude, env: env)
            assert_equal stock.slice("results", "log"), fast.slice("results", "log"), "#{state} boot"
            assert_same_loaded_features stock["loaded_features"], fast["loaded_features"], "#{state} boot"
            [stock, fast.merge("stats" => Marshal.load(File.binread(stats))), err] # rubocop:disable Security/MarshalLoad
          end.last
        end
      end
    end
  end
end
