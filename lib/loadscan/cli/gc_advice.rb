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
  # with the settings shows the runs that remain, and one without them what they save: GC time
  # and runs, against the resident size they cost (both boots' RSS at their end). Every boot
  # runs in the environment the last boot ran in (its record's RAILS_ENV and RACK_ENV: a
  # production boot's settings are checked in production). They are read when Ruby starts, from
  # the environment (a Dockerfile's ENV, a systemd unit, a Procfile), and hold for the whole process.
  class GCAdvice
    # Ruby's own initial slots per heap and malloc limit: no setting below them.
    DEFAULT_SLOTS = 10_000
    DEFAULT_MALLOC_LIMIT = 16 << 20
    MARGIN = 1.2
    LIVE_ROOM = 2
    # The malloc limit of the measuring boot.
    UNREACHED = 1 << 30

    # The variables of the last boot's record that name its environment (LastBoot).
    ENVIRONMENT = %w[RAILS_ENV RACK_ENV].freeze

    # `boot`: runs the app's boot with an environment (a Hash over the app's; nil unsets) and, when
    # told (`full`), a Rails app's whole boot, and returns doctor's report of it (String keys:
    # "gc", Loadscan.stats' GC figures; "rss_kb"; "environment"), or nil.
    def initialize(last, ruby: RUBY_VERSION, &boot)
      @gc = last && last["gc"].is_a?(Hash) ? last["gc"] : nil
      # nil: a record from before loadscan kept it (the boots then run in doctor's own).
      @environment = last && last["environment"].is_a?(Hash) ? ENVIRONMENT.to_h { |k| [k, last["environment"][k]] } : nil
      @ruby = Gem::Version.new(ruby)
      @boot = boot
    end

    # {"part", "environment", "last_runs", "settings", "without_settings", "with_settings"} (what
    # doctor shows), or nil when the last boot had no runs to remove.
    def report
      return nil unless @gc && runs(@gc).to_i.positive? && @gc["heaps"].is_a?(Array)

      settings = heap_settings
      measured = boot(settings.merge("RUBY_GC_MALLOC_LIMIT" => UNREACHED.to_s))
      malloc = measured && malloc_needed(measured["gc"])
      limit = malloc && round_up(malloc * MARGIN, 1 << 20)
      settings["RUBY_GC_MALLOC_LIMIT"] = limit.to_s if limit && limit > DEFAULT_MALLOC_LIMIT
      { "part" => deferred? ? "before setup" : "boot", "environment" => @environment, "last_runs" => runs(@gc),
        "settings" => settings, "without_settings" => figures(boot({})), "with_settings" => figures(boot(settings)) }
    end

    # Lines for doctor's text.
    def self.text(advice)
      return [] unless advice

      where = advice["part"] == "boot" ? "in the boot" : "before loadscan's setup"
      lines = ["GC settings for the last boot's #{advice["last_runs"]} GC runs #{where}, sized to its live objects and " \
               "checked in #{environment(advice["environment"])}; Ruby reads them from the environment when it starts, " \
               "for the whole process:"]
      lines << "  #{advice["settings"].map { |k, v| "#{k}=#{v}" }.join(" ")}"
      without, with = advice.values_at("without_settings", "with_settings")
      lines << "  a boot without them: #{boot_figures(without, advice["part"])}" if without
      lines << "  a boot with them: #{boot_figures(with, advice["part"])}#{cost(without, with)}" if with
      lines
    end

    # Where the boots ran: the last boot's RAILS_ENV and RACK_ENV, as set or not.
    def self.environment(env)
      return "doctor's own environment (the last boot recorded none)" unless env

      set = env.compact
      set.empty? ? "the last boot's environment (#{env.keys.join(" and ")} unset)" : "the last boot's environment (#{set.map { |k, v| "#{k}=#{v}" }.join(", ")})"
    end

    def self.boot_figures(f, part)
      left = part == "boot" ? f["runs"] : f["runs_before_setup"]
      where = part == "boot" ? "in the boot" : "before loadscan's setup"
      rss = f["rss_kb"] ? format("; RSS %.1f MiB at its end", f["rss_kb"] / 1024.0) : ""
      "#{left} GC runs #{where} (#{f["minor"]} minor, #{f["major"]} major), #{f["time_ms"]} ms of GC#{rss}"
    end

    # What the settings save (GC time) against what they cost (RSS), from the two boots.
    def self.cost(without, with)
      return "" unless without && with && without["rss_kb"] && with["rss_kb"]

      saved = without["time_ms"].to_f - with["time_ms"].to_f
      more = with["rss_kb"] - without["rss_kb"]
      share = without["rss_kb"].positive? ? format(" (%+.0f%%)", 100.0 * more / without["rss_kb"]) : ""
      format("; against a boot without them: %.1f ms of GC saved, %+.1f MiB of RSS%s", saved, more / 1024.0, share)
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
    def malloc_needed(gc)
      return nil unless runs(gc).to_i.zero?

      (deferred? ? gc["malloc_increase_before_setup"] : gc["malloc_increase"]).to_i
    end

    # The app's boot with `env`, in the last boot's environment (and as far as the last one
    # went: a Rails app's whole boot when it ended at after_initialize): its report, with its GC
    # figures ("gc", String keys), or nil.
    def boot(env)
      full = !deferred? && @gc["ended_by"] == "rails"
      report = @boot.call((@environment || {}).merge(env), full)
      return nil unless report.is_a?(Hash) && report["gc"].is_a?(Hash)

      report.merge("gc" => report["gc"].transform_keys(&:to_s))
    end

    # A boot's figures as doctor shows them: its GC, its RSS at its end, its environment.
    def figures(report)
      report && report["gc"].slice("runs", "runs_before_setup", "minor", "major", "time_ms", "ended_by")
                            .merge("rss_kb" => report["rss_kb"], "environment" => report["environment"])
    end
  end
end
