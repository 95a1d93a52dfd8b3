# frozen_string_literal: true

module Loadscan
  module CoreExt
    # `Ractor.new` ends a GC deferral first (BootGC, `ractor`): its tick runs in whichever thread of
    # the main Ractor runs, and while none does (the main thread waits in `Ractor#take`, `sleep`)
    # another Ractor could allocate without limit. Attached once GC is deferred; after the boot it
    # only calls Ruby's own.
    module NewRactor
      def new(...)
        BootGC.finish(:ractor) if Ractor.current == Ractor.main && BootGC.deferring?
        super
      end

      def self.attach
        Ractor.singleton_class.prepend(self) unless Ractor.singleton_class.include?(self)
      end
    end
  end
end
