# frozen_string_literal: true

module Loadscan
  module TestSupport
    # The checkout, and its lib/ (loadscan is always loaded from here by absolute path).
    ROOT = File.expand_path("../..", __dir__)
    LIB = File.join(ROOT, "lib")
    # The command line, as users run it.
    EXE = File.join(ROOT, "exe", "loadscan")
  end
end
