# frozen_string_literal: true

module Loadscan
  # `doctor`'s GC settings: the RUBY_GC_* variables that would have removed the GC runs of the
  # app's last boot (its record's "gc" figures: Loadscan::BootGC), and the figures of boots that
  # use them. GC deferred during the boot leaves only the runs before loadscan's setup (Ruby's
  # startup, RubyGems, `bundler/setup`): the settings then cover that part, which every program
  # of the app shares; with LOADSCAN_GC=off they cover the whole boot.
  #
  # Per Ruby: 3.3 and later size each heap (RUBY_GC_HEAP_<i>_INIT_SLOTS, i = 0..4: 40, 80, 160,
  # 320 and 640-byte slots), 3.1 its one heap (RUBY_GC_HEAP_INIT_SLOTS). A heap is sized to the
  # objects live in it at the part's end times LIVE_ROOM (room for as much garbage again between
  # two GCs), not to all the part allocated: a boot that allocated 5M objects would be told to
  # touch a heap of 6M slots at every start, for runs that free mostly garbage anyway; malloc's
  # limit (RUBY_GC_MALLOC_LIMIT) is measured, by a boot that uses the heap sizes and a limit too
  # high to be reached, and set where that boot needs more than Ruby's default. A second boot
  # with the settings shows the runs that remain. They are read when Ruby starts, from the
  # environment (a Dockerfile's ENV, a systemd unit, a Procfile), and hold for the whole process.
  class GCAdvice
    # Ruby's own initial slots per heap and malloc limit: no setting below them.
    DEFAULT_SLOTS = 10_000
    DEFAULT_MALLOC_LIMIT = 16 << 20
    MARGIN = 1.2
    LIVE_ROOM = 2
    # The malloc limit of the measuring boot.
    UNREACHED = 1 << 30

    # `boot`: runs the app's boot with an environment (a Hash) and returns its Loadscan.stats
    # (String keys; `doctor` boots it as it boots), or nil.
    def initialize(last, ruby: RUBY_VERSION, &boot)
      @gc = last && last["gc"].is_a?(Hash) ? last["gc"] : nil
      @ruby = Gem::Version.new(ruby)
      @boot = boot
    end

    # {"part", "last_runs", "settings", "with_settings"} (what doctor shows), or nil when the
    # last boot had no runs to remove.
    def report
      return nil unless @gc && runs(@gc).to_i.positive? && @gc["heaps"].is_a?(Array)

      settings = heap_settings
      measured = boot(settings.merge("RUBY_GC_MALLOC_LIMIT" => UNREACHED.to_s))
      malloc = measured && malloc_needed(measured)
      limit = malloc && round_up(malloc * MARGIN, 1 << 20)
      settings["RUBY_GC_MALLOC_LIMIT"] = limit.to_s if limit && limit > DEFAULT_MALLOC_LIMIT
      with = boot(settings)
      { "part" => deferred? ? "before setup" : "boot", "last_runs" => runs(@gc), "settings" => settings,
        "with_settings" => with && with["gc"].slice("runs", "runs_before_setup", "minor", "major", "time_ms", "ended_by") }
    end

    # Lines for doctor's text.
    def self.text(advice)
      return [] unless advice

      where = advice["part"] == "boot" ? "in the boot" : "before loadscan's setup"
      lines = ["GC settings sized to the last boot's live objects, for its #{advice["last_runs"]} GC runs #{where} " \
               "(the environment's, read when Ruby starts, for the whole process):"]
      lines << "  #{advice["settings"].map { |k, v| "#{k}=#{v}" }.join(" ")}"
      if (w = advice["with_settings"])
        left = advice["part"] == "boot" ? w["runs"] : w["runs_before_setup"]
        lines << "  a boot with them: #{left} GC runs #{where} (#{w["minor"]} minor, #{w["major"]} major), #{w["time_ms"]} ms of GC"
      end
      lines
    end

    private

    def deferred? = @gc["deferred"] == true
    def runs(gc) = deferred? ? gc["runs_before_setup"] : gc["runs"]
    # Objects live in a heap at the part's end (a record without them: those allocated).
    def live(heap)
      n = deferred? ? heap["live_before_setup"] || heap["allocated_before_setup"] : heap["live"] || heap["allocated"]
      n.to_i
    end

    def heap_settings
      heaps = @gc["heaps"].select { |h| h.is_a?(Hash) }
      if @ruby >= Gem::Version.new("3.3")
        heaps.each_with_index.to_h { |h, i| ["RUBY_GC_HEAP_#{i}_INIT_SLOTS", slots(live(h))] }.compact
      else
        { "RUBY_GC_HEAP_INIT_SLOTS" => slots(heaps.sum { |h| live(h) }) }.compact
      end.transform_values(&:to_s)
    end

    # Slots for `n` live objects, or nil where Ruby's default holds them.
    def slots(n)
      n * LIVE_ROOM > DEFAULT_SLOTS ? round_up(n * LIVE_ROOM, 1000) : nil
    end

    def round_up(x, unit) = (x / unit).ceil * unit

    # What malloc grew by up to the part's end, in a boot that made no GC run before it.
    def malloc_needed(stats)
      gc = stats["gc"] or return nil
      return nil unless runs(gc).to_i.zero?

      (deferred? ? gc["malloc_increase_before_setup"] : gc["malloc_increase"]).to_i
    end

    # The app's boot with `env` (and as far as the last one went: a Rails app's environment
    # when it ended at after_initialize), its figures.
    def boot(env)
      full = !deferred? && @gc["ended_by"] == "rails" ? { "LOADSCAN_DOCTOR_ENVIRONMENT" => "1" } : {}
      stats = @boot.call(env.merge(full))
      stats.is_a?(Hash) && stats["gc"].is_a?(Hash) ? stats.merge("gc" => stats["gc"].transform_keys(&:to_s)) : nil
    end
  end
end
