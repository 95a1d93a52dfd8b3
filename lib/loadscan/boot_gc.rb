# frozen_string_literal: true

module Loadscan
  # A boot without GC pauses. From `Loadscan.setup` until the boot ends, Ruby's GC does not run
  # on its own (`GC.disable`); then it runs as it always does. The boot ends at the first of:
  #
  #   rails      Rails' after_initialize (the railtie), or the watchdog seeing the Rails app
  #              initialized
  #   booted     `Loadscan.booted!` (programs that are not Rails apps)
  #   allocated  the boot has allocated as many objects as the last boot of the same program
  #              had when it exited, if that boot never said it had booted (a script, `rake -T`:
  #              the last boot's record beside the cache says how many)
  #   fork       a `fork` (the parent's boot ends before it) or `Process.daemon`
  #   cap        the budget runs (below) together found CAP of growth: no boot allocates that much
  #   time       MAX_SECONDS after setup
  #   exit       the program ends first (a short script, `rake -T`)
  #
  # While it is deferred, memory is bounded: whenever Ruby's memory (heap pages added, malloc'd
  # bytes) grew by BUDGET since the last GC, one minor GC runs (a budget run) and the deferral goes
  # on. A watchdog thread, alive only during the deferral, checks the budget and the ends that
  # no callback announces, a few times a second; `require` pays nothing for it.
  #
  # The app keeps its own GC switch: during the deferral `GC.disable` and `GC.enable` answer and
  # change the app's view of it (what they would answer without loadscan), and when the boot ends
  # GC is left as the app last set it; an app that had GC disabled before setup is not deferred
  # at all. `GC.start` and `GC.compact` run as always; `GC.stress = true` ends the deferral.
  # Finalizers, WeakRefs and ObjectSpace see what they see when GC runs late: nothing is
  # collected until a GC runs, and everything unreachable is collected then.
  #
  # The figures of the boot's GC (runs, time, allocations and live slots per heap, malloc growth)
  # are `Loadscan.stats[:gc]` and the last boot's record.
  module BootGC
    # How long the watchdog sleeps between checks (it then waits for the GVL: while the boot runs
    # Ruby code, Ruby hands it over every 100 ms).
    TICK = 0.02
    # Growth of Ruby's memory since the last GC that makes one minor GC run during the deferral.
    BUDGET = 64 << 20
    # Growth over all budget runs that ends the deferral.
    CAP = 512 << 20
    MAX_SECONDS = 60.0
    PAGE_SIZE = GC::INTERNAL_CONSTANTS[:HEAP_PAGE_SIZE] || (16 << 10)
    ENABLE = GC.singleton_class.instance_method(:enable)
    DISABLE = GC.singleton_class.instance_method(:disable)

    # GC.disable, GC.enable and GC.stress= during the deferral (prepended to GC's singleton class).
    module Switch
      def disable = BootGC.switch(true) { super }
      def enable = BootGC.switch(false) { super }

      def stress=(flag)
        BootGC.finish(:stress) if flag
        super
      end
    end

    # A fork ends the boot first (the child never starts with GC off); so does Process.daemon,
    # which forks without Process._fork.
    module Fork
      def _fork
        BootGC.before_fork
        super
      end

      def daemon(...)
        BootGC.finish(:fork)
        super
      end
    end

    # The ends that say where the program's boot ended (the next boot of a program that only
    # exited ends at its mark; one that said it had booted will say so again).
    SIGNALS = %i[rails booted exit].freeze

    @lock = Thread::Mutex.new

    class << self
      # Starts deferring GC (when `defer`), or only watching for the boot's end, for its figures.
      # `mark`: the objects the last boot of this program had allocated when its boot ended (nil
      # when unknown). Once per process.
      def start(defer:, mark: nil)
        return if @setup

        @setup = snapshot
        key # as the program was started, before it shifts ARGV
        @mark = mark
        @boot_end = nil
        @budget_runs = 0
        @grown = 0
        @app_disabled = false
        # GC.disable answers true when it was off already (the app's doing): then it is left alone.
        @deferred = @deferring = defer && !DISABLE.bind_call(GC)
        @ended = nil
        return unless @deferring

        GC.singleton_class.prepend(Switch)
        Process.singleton_class.prepend(Fork)
        @last_gc = growth_point
        @watchdog = Thread.new { watch }
        @watchdog.name = "loadscan-gc"
        @watchdog.report_on_exception = false
      end

      def deferring? = @deferring == true

      # Which program this is, as the next boot's mark is kept for: its name and first argument
      # (`bin/rails server` and `bin/rails -T` end their boots at different points), hashed.
      def key
        @key ||= Native.stable_hash("#{$PROGRAM_NAME}\0#{ARGV.first}")
      end

      # Ends the boot (`why`: one of the ends above). GC is enabled again unless the app disabled
      # it. Returns true if the boot ended now, false if it had ended already or never started.
      def finish(why)
        ended, watchdog = locked do
          next false if @setup.nil?

          # Where the program's own boot ended (the next boot's mark), even after the deferral did.
          @boot_end ||= [GC.stat(:total_allocated_objects), why.to_s] if SIGNALS.include?(why)
          next false if @ended

          @ended = snapshot.merge(why: why.to_s)
          next true unless @deferring

          @deferring = false
          ENABLE.bind_call(GC) unless @app_disabled
          [true, @watchdog]
        end
        stop(watchdog) if watchdog && watchdog != Thread.current
        ended
      end

      # The parent's boot ends before a fork, and one GC runs first, so the children share a
      # heap without the boot's garbage.
      def before_fork
        deferring = @deferring
        GC.start if finish(:fork) && deferring && !@app_disabled
      end

      # `GC.disable` (disable: true) or `GC.enable` during the deferral: the app's own switch,
      # as Ruby would answer (true when it was off). After the deferral: Ruby's own.
      def switch(disable)
        locked do
          next yield unless @deferring

          was = @app_disabled
          @app_disabled = disable
          was
        end
      end

      # The boot's GC figures (Loadscan.stats[:gc], the last boot's record): see README, "GC
      # during the boot". Counted from the start of the process to the end of the boot (to now
      # while it has not ended).
      def figures
        return nil unless @setup

        at_end = @ended || snapshot
        { deferred: @deferred, ended_by: @ended&.fetch(:why), boot_ms: ((at_end[:at] - @setup[:at]) * 1000).round,
          runs_after_boot: @ended ? GC.count - @ended[:count] : 0,
          runs: at_end[:count], minor: at_end[:minor], major: at_end[:major], time_ms: at_end[:time_ms],
          runs_before_setup: @setup[:count], time_ms_before_setup: @setup[:time_ms], budget_runs: @budget_runs,
          malloc_increase_before_setup: @setup[:malloc],
          allocated_objects: at_end[:allocated], allocated_objects_before_setup: @setup[:allocated],
          boot_key: BootGC.key, boot_end_objects: @boot_end&.first, boot_end_by: @boot_end&.last,
          malloc_increase: at_end[:malloc], oldmalloc_increase: at_end[:oldmalloc], old_objects: at_end[:old_objects],
          last_gc_by: at_end[:gc_by], last_major_by: at_end[:major_by],
          heaps: at_end[:heaps].each_with_index.map { |h, i| h.merge(allocated_before_setup: @setup[:heaps].dig(i, :allocated)) } }
      end

      private

      # Kills the watchdog and waits for it to be gone (not in a trap handler, where Ruby allows
      # no waiting: it is gone at its next step).
      def stop(watchdog)
        watchdog.kill
        watchdog.join
      rescue ThreadError
        nil
      end

      # A Mutex keeps the watchdog and the app's threads apart; a trap handler may lock none
      # (Ruby raises), so there the block runs as is.
      def locked
        return yield if @lock.owned?

        begin
          @lock.lock
        rescue ThreadError
          return yield
        end
        begin
          yield
        ensure
          @lock.unlock
        end
      end

      # The watchdog: checks the budget and the ends no callback announces, until the boot ends.
      # Whatever stops it (an error, Thread#kill by the app) ends the boot.
      def watch
        until @ended
          sleep TICK
          why = locked { check }
          finish(why) if why
        end
      rescue Exception # rubocop:disable Lint/RescueException -- the watchdog must never fail the app
        nil
      ensure
        finish(:watchdog) unless @ended
      end

      # Why the boot ends now, or nil (then a budget run may have run).
      def check
        return nil unless @deferring
        return :allocated if @mark && GC.stat(:total_allocated_objects) >= @mark
        return :time if Process.clock_gettime(Process::CLOCK_MONOTONIC) - @setup[:at] > MAX_SECONDS
        return :rails if rails_initialized?

        budget
      end

      # Whether a Rails app has initialized (an app without the railtie), asked without calling
      # `Rails.application`, which would make the app's instance (and run its hooks) from here.
      def rails_initialized?
        app = defined?(::Rails) && ::Rails.is_a?(Module) && ::Rails.instance_variable_get(:@application)
        app.respond_to?(:initialized?) && app.initialized? == true
      end

      # One minor GC when Ruby's memory grew by BUDGET since the last GC (any GC: the app's too).
      def budget
        now = growth_point
        @last_gc = now if now[0] != @last_gc[0]
        grown = GC.stat(:malloc_increase_bytes) + ((now[1] - @last_gc[1]) * PAGE_SIZE)
        return nil if grown < BUDGET
        return :cap if (@grown += grown) >= CAP

        @budget_runs += 1
        GC.start(full_mark: false, immediate_sweep: true)
        @last_gc = growth_point
        nil
      end

      def growth_point = [GC.count, GC.stat(:heap_allocated_pages)]

      def snapshot
        s = GC.stat
        info = GC.latest_gc_info
        { at: Process.clock_gettime(Process::CLOCK_MONOTONIC), count: s[:count], minor: s[:minor_gc_count],
          major: s[:major_gc_count], time_ms: s[:time] || 0, allocated: s[:total_allocated_objects],
          malloc: s[:malloc_increase_bytes], oldmalloc: s[:oldmalloc_increase_bytes], old_objects: s[:old_objects],
          gc_by: s[:count].zero? ? nil : info[:gc_by]&.to_s, major_by: info[:major_by]&.to_s, heaps: heaps(s) }
      end

      # Each heap (size pool): its slot size, slots, objects allocated in it and live in it now.
      # Ruby 3.1 has one heap of 40-byte slots, whose figures are GC.stat's.
      def heaps(stat)
        unless GC.respond_to?(:stat_heap)
          return [{ slot_size: GC::INTERNAL_CONSTANTS[:RVALUE_SIZE], slots: stat[:heap_available_slots],
                    allocated: stat[:total_allocated_objects], live: stat[:heap_live_slots] }]
        end

        GC.stat_heap.sort.map do |_, h|
          { slot_size: h[:slot_size], slots: h[:heap_eden_slots], allocated: h[:total_allocated_objects],
            live: h[:total_allocated_objects] - h[:total_freed_objects], force_major: h[:force_major_gc_count] }
        end
      end
    end
  end
end
