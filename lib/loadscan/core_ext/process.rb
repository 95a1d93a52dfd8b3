# frozen_string_literal: true

module Loadscan
  module CoreExt
    # `fork` while another thread holds loadscan's state (a scan or a listing, GVL released)
    # would leave the child a lock held by a thread it does not have: the child would leave
    # every `require` to Ruby for its whole life. Every fork goes through `Process._fork` (Ruby
    # 3.1+: `Kernel#fork`, `Process.fork`, `IO.popen("-")`) but `Process.daemon` (libc's
    # daemon(3), called directly), so loadscan takes the lock in both first, waiting for the
    # other thread with `sleep` (the GVL released, interrupts served), and lets it go after, in
    # the parent and in the child (the daemon, where this thread goes on alone).
    #
    # Before that, where GC was deferred during the boot (BootGC), the parent's boot ends: a
    # child never starts with GC off, and after `fork` one GC runs first, so that the children
    # share a heap without the boot's garbage (not while the lock is held). The one hook on
    # `_fork` and `daemon` for both, in that order.
    module Fork
      # How long a fork waits for the lock before forking without it (the child then leaves
      # every `require` to Ruby): scans end on their own; this bounds the pathological case of
      # an entry's `to_path` that forks, or waits for the forking thread.
      PATIENCE = 5.0
      PAUSE = 0.001

      def _fork
        BootGC.before_fork if Fork.boot_gc?
        held = Fork.hold
        super
      ensure
        Native.release_after_fork if held
      end

      def daemon(...)
        BootGC.finish(:fork) if Fork.boot_gc?
        held = Fork.hold
        super
      ensure
        Native.release_after_fork if held
      end

      def self.hold
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE
        until Native.hold_for_fork
          return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          sleep PAUSE
        end
        true
      end

      # Whether GC was deferred in this process's boot (a fork ends it, if it goes on).
      def self.boot_gc? = defined?(BootGC) && BootGC.deferred?

      def self.attach
        Process.singleton_class.prepend(self) unless Process.singleton_class.include?(self)
      end
    end
  end
end
