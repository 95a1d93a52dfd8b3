# frozen_string_literal: true

require_relative "core_ext/ractor"
require_relative "core_ext/setrlimit"

module Loadscan
  # A boot with fewer GC pauses. From `Loadscan.setup` until the boot ends, Ruby's GC does not run
  # on its own (`GC.disable`) but as budget runs; then it runs as it always does. Where, and when:
  #
  #   LOADSCAN_GC=auto  (the default) where the boot has a known end: a Rails app set up from its
  #                     config/boot.rb (its end: after_initialize), or a program whose last boot
  #                     (the record beside the cache) ended at `Loadscan.booted!` or Rails'
  #                     after_initialize
  #   LOADSCAN_GC=on    every program (one that never says it has booted: up to its mark, below)
  #   LOADSCAN_GC=off   never
  #
  # and only on Ruby 3.3 and later, on Linux (/proc says how much memory the process holds and
  # which descriptors it has open; 3.1 has no postponed job a native thread may trigger). Ruby 3.4
  # and later collect to retry an `open` that ran out of file descriptors while GC is disabled;
  # 3.3 does not (the `open` fails with EMFILE where stock's GC would have closed the Files left
  # to it), so there the deferral needs FILES_HEADROOM descriptors free below the soft limit to
  # start, and ends (`files`) when fewer are left (seen by the tick, and at once after
  # `Process.setrlimit`); on every Ruby, 256 descriptors opened since the last GC make a budget
  # run. No boot opens that many Files between two ticks (`File.open` takes 3–9 µs).
  #
  # The boot ends at the first of:
  #
  #   rails      Rails' after_initialize (the railtie), or a tick seeing the Rails app initialized
  #   booted     `Loadscan.booted!` (programs that are not Rails apps)
  #   allocated  the boot has allocated as many objects as the last boot of the same program
  #              had when it exited, if that boot never said it had booted (a script, `rake -T`)
  #   fork       a `fork` (the parent's boot ends before it) or `Process.daemon`
  #   ractor     a second Ractor is made (`Ractor.new`): the tick runs only while a thread of the
  #              main Ractor runs, and another Ractor may allocate while none does
  #   cap        the process's anonymous resident size grew by CAP since setup
  #   files      Ruby 3.3: fewer than FILES_HEADROOM descriptors left below the soft limit
  #   memory     two budget runs in a row were due to resident growth Ruby does not count (fiber
  #              stacks, a C library's memory): only Ruby's own GC schedule keeps that in check
  #   time       MAX_SECONDS after setup
  #   exit       the program ends first (loadscan's at_exit, after the program's own)
  #
  # While it is deferred, memory is bounded: whenever Ruby allocated BUDGET since the last GC (heap
  # pages, malloc), or the process's anonymous resident size (RssAnon: not the pages of mapped
  # files, shared libraries, which no GC frees) grew by BUDGET since then (what Ruby does not
  # count: fiber stacks, a C library's malloc), one full GC runs (a budget run: it frees all that stock's
  # GCs would, the old garbage too) and the deferral goes on, unless it ran for growth Ruby does not
  # count twice in a row (the stacks of fibers it freed stay pooled: each such run came BUDGET
  # higher; one alone is a boot's own, a Rails app's on Ruby 4.1); CAP of growth ends it. No
  # budget run while the app has GC disabled (CAP still ends the deferral). The budget and the
  # ends no callback announces are checked by the tick, every TICK_MS, in the main Ractor's running
  # thread at its next interrupt check (a postponed job, as Ruby runs finalizers), asked by a
  # native thread of the extension (ext/loadscan/src/ticker.rs): no Ruby thread, so nothing in
  # `Thread.list`, in Ruby's deadlock check or in Puma's count of threads started in the boot;
  # `require` pays nothing for it. The tick is native and calls no Ruby method, so it can take no
  # exception raised into the thread and do no IO a Fiber scheduler sees; when it ends the
  # deferral it enables GC itself (unless the app disabled it), and the rest of the end (GC's
  # methods back, the figures) is done here at the next call (`catch_up`). Where the native thread
  # cannot be made (a thread limit), GC is not deferred.
  #
  # The app keeps its own GC switch: during the deferral `GC.disable` and `GC.enable` answer and
  # change the app's view of it (what they would answer without loadscan), and when the boot ends
  # GC is left as the app last set it; an app that had GC disabled before setup is not deferred
  # at all. `GC.start` and `GC.compact` run as always; `GC.stress = true` ends the deferral. Those
  # three are GC's own methods again once it ends (no module left on GC: a Ractor can call them).
  # Finalizers, WeakRefs and ObjectSpace see what they see when GC runs late.
  #
  # The figures of the boot's GC (runs, time, allocations and live slots per heap) are
  # `Loadscan.stats[:gc]` and the last boot's record.
  module BootGC
    # How often the native thread asks for a `tick`.
    TICK_MS = 20
    # What Ruby allocates (heap pages, malloc), or the process's anonymous resident size grows by,
    # since the last GC that makes one full GC run.
    BUDGET = 64 << 20
    # The resident size's part of it, read at every tick (as MAX_SECONDS): counted boots under
    # callgrind raise it after setup, since the tool's own memory is resident in the process too.
    RESIDENT_BUDGET = BUDGET
    # Growth of the anonymous resident size since setup that ends the deferral: no boot grows that much.
    CAP = 512 << 20
    PAGE_SIZE = GC::INTERNAL_CONSTANTS[:HEAP_PAGE_SIZE] || (64 << 10)
    # Descriptors that must stay free below the soft limit on a Ruby that does not collect for an
    # `open` that ran out of them while GC is disabled (3.3; `files_headroom`). The tick also runs
    # a budget run when 256 more are open than at the last GC (ext/loadscan/src/ticker).
    FILES_HEADROOM = 16_384
    # Read at every tick: counted boots raise it after setup (bench/support/rails_app.rb).
    MAX_SECONDS = 60.0
    ENABLE = GC.singleton_class.instance_method(:enable)
    DISABLE = GC.singleton_class.instance_method(:disable)
    STRESS = GC.singleton_class.instance_method(:stress=)
    # GC's methods that answer the app's own switch during the deferral, each kept under ORIGINAL's
    # name meanwhile and put back when it ends.
    SWITCHED = %i[disable enable stress=].freeze
    ORIGINAL = { disable: :__loadscan_gc_disable, enable: :__loadscan_gc_enable, "stress=": :__loadscan_gc_stress= }.freeze

    # GC.disable, GC.enable and GC.stress= during the deferral (copied onto GC's singleton class).
    # Another Ractor gets GC's own (the deferral's state is the main Ractor's).
    module Switch
      def disable
        return __loadscan_gc_disable unless Ractor.current == Ractor.main

        BootGC.switch(true) { DISABLE.bind_call(GC) }
      end

      def enable
        return __loadscan_gc_enable unless Ractor.current == Ractor.main

        BootGC.switch(false) { ENABLE.bind_call(GC) }
      end

      def stress=(flag)
        return self.__loadscan_gc_stress = flag unless Ractor.current == Ractor.main

        BootGC.finish(:stress) if flag
        STRESS.bind_call(GC, flag)
      end
    end

    # The ends that say where the program's boot ended (the next boot of a program that only
    # exited ends at its mark; one that said it had booted will say so again, and is deferred
    # by default).
    SIGNALS = %i[rails booted exit].freeze
    KNOWN_ENDS = %w[rails booted].freeze

    @lock = Thread::Mutex.new

    class << self
      # Whether GC can be deferred in this process (see above).
      def supported?(ruby: RUBY_VERSION, linux: File.readable?("/proc/self/status"))
        ruby >= "3.3" && linux
      end

      # FILES_HEADROOM on a Ruby that does not collect for an `open` that ran out of descriptors
      # while GC is disabled, else 0.
      def files_headroom(ruby = RUBY_VERSION) = ruby >= "3.4" ? 0 : FILES_HEADROOM

      # Descriptors free below the soft limit (nil where unknown or unlimited).
      def files_free
        soft, = Process.getrlimit(:NOFILE)
        return nil if soft == Process::RLIM_INFINITY

        soft - Dir.children("/proc/self/fd").size
      rescue SystemCallError, NotImplementedError
        nil
      end

      # Starts deferring GC (`mode`: true, false or :auto, LOADSCAN_GC), or only watching for the
      # boot's end, for its figures. `last_end`: how and where the last boot of this program
      # ended (["exit", objects], ["booted", objects]…, or nil when unknown); `rails`: whether
      # a Rails app's config/boot.rb set loadscan up. Once per process.
      def start(mode:, last_end: nil, rails: false)
        return if @setup

        @setup = snapshot
        key # as the program was started, before it shifts ARGV
        @mark = mark(last_end)
        @boot_end = nil
        @budget_runs = @unaccounted_runs = 0
        @app_disabled = false
        @deferred = @deferring = false
        @ended = nil
        # Descriptors are counted only where this Ruby needs them free (3.3), not on every setup.
        free = files_free if files_headroom.positive?
        @not_deferred = why_not(mode, last_end, rails, files_free: free) and return
        # All of it or none, as end_deferral.
        Thread.handle_interrupt(Object => :never) { defer }
      end

      def deferring?
        locked { catch_up }
        @deferring == true
      end

      # Whether GC was deferred in this process's boot (ended or not): a fork then ends the boot
      # first (CoreExt::Fork, the one hook on `_fork` and `daemon`, also Process.daemon's).
      def deferred? = @deferred == true

      # Which program this is, as the next boot's mark is kept for: its name and first argument
      # (`bin/rails server` and `bin/rails -T` end their boots at different points), hashed.
      def key
        @key ||= Native.unseeded_hash("#{$PROGRAM_NAME}\0#{ARGV.first}")
      end

      # Ends the boot (`why`: one of the ends above). GC is enabled again unless the app disabled
      # it. Returns true if the boot ended now, false if it had ended already or never started.
      def finish(why)
        locked do
          next false if @setup.nil?

          catch_up
          # Where the program's own boot ended (the next boot's mark), even after the deferral did.
          @boot_end ||= [GC.stat(:total_allocated_objects), why.to_s] if SIGNALS.include?(why)
          next false if @ended

          @ended = snapshot.merge(why: why.to_s)
          next true unless @deferring

          end_deferral
          true
        end
      end

      # Ends the deferral (`files`) where fewer descriptors are free than this Ruby needs while GC
      # is disabled (after `Process.setrlimit`).
      def check_files
        free = files_free
        finish(:files) if free && free < files_headroom
      end

      # Where the tick ended the deferral (ticker/deferral.rs: it enabled GC unless the app
      # disabled it, and kept GC's figures then), the rest of the end, as it ended.
      def catch_up
        return unless @deferring

        @budget_runs, (why, stat, info, at) = Native.ticker_state
        return unless why

        @boot_end ||= [stat[:total_allocated_objects], why.to_s] if SIGNALS.include?(why)
        @ended ||= snapshot(stat, info, at).merge(why: why.to_s)
        end_deferral
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
          # A tick that ended the deferral before (GC as the app had set it): GC as it sets it now.
          catch_up
          was
        end
      end

      # The boot's GC figures (Loadscan.stats[:gc], the last boot's record): see README, "GC
      # during the boot". Counted from the start of the process to the end of the boot (to now
      # while it has not ended).
      def figures
        return nil unless @setup

        locked { catch_up }

        at_end = @ended || snapshot
        { deferred: @deferred, not_deferred: @not_deferred, ended_by: @ended&.fetch(:why),
          boot_ms: ((at_end[:at] - @setup[:at]) * 1000).round, runs_after_boot: @ended ? GC.count - @ended[:count] : 0,
          runs: at_end[:count], minor: at_end[:minor], major: at_end[:major], time_ms: at_end[:time_ms],
          runs_before_setup: @setup[:count], time_ms_before_setup: @setup[:time_ms], budget_runs: @budget_runs,
          malloc_increase_before_setup: @setup[:malloc],
          allocated_objects: at_end[:allocated], allocated_objects_before_setup: @setup[:allocated],
          boot_key: BootGC.key, boot_end_objects: @boot_end&.first, boot_end_by: @boot_end&.last,
          malloc_increase: at_end[:malloc], oldmalloc_increase: at_end[:oldmalloc], old_objects: at_end[:old_objects],
          last_gc_by: at_end[:gc_by], last_major_by: at_end[:major_by],
          heaps: at_end[:heaps].each_with_index.map do |h, i|
            h.merge(allocated_before_setup: @setup[:heaps].dig(i, :allocated), live_before_setup: @setup[:heaps].dig(i, :live))
          end }
      end

      # Why GC is not deferred in this process (`mode`, `last_end`, `rails`: as `start`'s), or nil:
      # the decision alone, from what it reads of the process (`ruby`, `linux`: /proc readable,
      # `ractors`: Ractor.count, `files_free`: descriptors free below the soft limit, nil where
      # unknown or not counted).
      def why_not(mode, last_end, rails, ruby: RUBY_VERSION, linux: File.readable?("/proc/self/status"), ractors: Ractor.count,
                  files_free: nil)
        return "off" if mode == false
        return "Ruby #{ruby} (3.3 and later on Linux only)" unless supported?(ruby: ruby, linux: linux)
        if files_free && files_free < files_headroom(ruby)
          return "#{files_free} file descriptors free (Ruby #{ruby} needs #{files_headroom(ruby)}: `ulimit -n`)"
        end
        unless mode == true || rails || KNOWN_ENDS.include?(last_end&.first)
          return "no known end of the boot (LOADSCAN_GC=on defers it anyway)"
        end

        "Ractors running" if ractors > 1
      end

      # Where the deferral ends by allocation (the `allocated` end): the objects the last boot of
      # this program had allocated when it exited, if it only exited (`last_end`: as `start`'s).
      def mark(last_end)
        last_end&.first == "exit" ? last_end.last : nil
      end

      private

      def defer
        # GC.disable answers true when it was off already (the app's doing): then it is left alone.
        return @not_deferred = "app disabled GC" if DISABLE.bind_call(GC)

        @deferred = @deferring = true
        unless Native.start_ticker(self, Loadscan, [TICK_MS, @mark.to_i, MAX_SECONDS, BUDGET, CAP, PAGE_SIZE, files_headroom])
          @deferred = @deferring = false
          ENABLE.bind_call(GC)
          return @not_deferred = "no native thread"
        end
        switch_methods(true)
        CoreExt::NewRactor.attach
        CoreExt::SetRlimit.attach if files_headroom.positive?
      end

      # GC's switch methods: the app's own view of them during the deferral (on: true), GC's own
      # again after it. Ruby's "method redefined" warnings are not the app's to see.
      def switch_methods(on)
        gc = GC.singleton_class
        verbose = $VERBOSE
        $VERBOSE = nil
        SWITCHED.each do |name|
          if on
            gc.send(:alias_method, ORIGINAL.fetch(name), name)
            gc.send(:define_method, name, Switch.instance_method(name))
          else
            gc.send(:alias_method, name, ORIGINAL.fetch(name))
            gc.send(:remove_method, ORIGINAL.fetch(name))
          end
        end
      ensure
        $VERBOSE = verbose
      end

      # A Mutex keeps the app's threads and the tick apart; a trap handler may lock none (Ruby
      # raises), nor a tick that came in while this thread holds it: there the block runs as is.
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

      # The end of the deferral (the clock stopped, GC's methods back, GC as the app last set it),
      # all of it: an exception raised into the thread meanwhile (Timeout) is raised when it is
      # done, in the same call, so GC is never left off nor half its methods put back.
      def end_deferral
        Thread.handle_interrupt(Object => :never) do
          @deferring = false
          @budget_runs = Native.stop_ticker.first
          switch_methods(false)
          (@app_disabled ? DISABLE : ENABLE).bind_call(GC)
        end
      end

      # GC's figures now, or those `stat`, `info` and `at` (monotonic seconds) say (the heaps' are
      # now's: Ruby has no C function for them).
      def snapshot(s = GC.stat, info = GC.latest_gc_info, at = Process.clock_gettime(Process::CLOCK_MONOTONIC))
        { at: at, count: s[:count], minor: s[:minor_gc_count],
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
