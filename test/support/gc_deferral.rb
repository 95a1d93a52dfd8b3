# frozen_string_literal: true

require_relative "../../lib/loadscan/boot_gc"

module Loadscan
  module TestSupport
    # Whether a boot this test starts has its GC deferred (Loadscan::BootGC's rules, the mode
    # aside): Ruby 3.4 and later on Linux, and 3.3 where the soft limit of descriptors leaves
    # BootGC::FILES_HEADROOM of them free (the test's children inherit this process's limit).
    def self.gc_deferred?
      return false unless BootGC.supported?

      free = BootGC.files_free
      free.nil? || free >= BootGC.files_headroom + 64
    end
  end
end
