# frozen_string_literal: true

module Loadscan
  module CoreExt
    # `Process.setrlimit` that leaves fewer than BootGC.files_headroom descriptors free ends a GC
    # deferral at once (BootGC, `files`): on Ruby 3.3 an `open` that runs out of descriptors
    # while GC is disabled fails, where stock's GC would have closed the Files left to it, and
    # the next tick may come after the program's next opens. Attached where GC is deferred on such
    # a Ruby; after the boot, and in another Ractor (the deferral's state is the main Ractor's),
    # it only calls Ruby's own.
    module SetRlimit
      def setrlimit(...)
        result = super
        BootGC.check_files if Ractor.current == Ractor.main && BootGC.deferring?
        result
      end

      def self.attach
        Process.singleton_class.prepend(self) unless Process.singleton_class.include?(self)
      end
    end
  end
end
