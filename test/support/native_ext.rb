# frozen_string_literal: true

require_relative "../../fixtures/cext"

module Loadscan
  module TestSupport
    # Real loadable .so files for trees (names from Fixtures::CExt::NAMES).
    module NativeExt
      CACHE = File.join(Loadscan::TestSupport::ROOT, "tmp", "cext-cache")

      def install_ext(dir, rel)
        Fixtures::CExt.install(Fixtures::CExt.build(CACHE), File.join(dir, rel))
      end
    end
  end
end
