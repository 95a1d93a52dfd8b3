# frozen_string_literal: true

module Loadscan
  # The figures of a boot, and of the last one kept beside the cache for `loadscan stats` and
  # `doctor`: written at exit by the process that set loadscan up (not by forked workers; the
  # extension writes it, as it writes the cache), as one JSON document replaced atomically, only
  # where the cache itself could be read or written. This file reads it back (through the
  # extension, with the cache's own checks) and is the one place a boot's figures are put in
  # words: `loadscan stats`, `doctor` and the LOADSCAN_STATS=1 line.
  #
  #   {"at":"2026-11-30T23:59:01Z","pid":4242,"program":"bin/rails","ruby":"3.1.2",
  #    "environment":{"RAILS_ENV":"production","RACK_ENV":null},
  #    "cache":"clean","engaged":true,"gc":{…},"hits":1900,"misses":5,"left_to_ruby":{"unsure_miss":3},…}
  #
  # Its environment (RAILS_ENV and RACK_ENV, nil when unset) is where `doctor` checks its GC advice.
  module LastBoot
    class << self
      # The last record in `dir` as a Hash with String keys, or nil when there is none. It is
      # trusted as the cache file is (Native.read_last_boot: the cache dir's checks, then a
      # regular file of at most 64 KiB, opened without following a symlink or blocking on a
      # fifo, owned by this user or root and writable by no one else). Anything else: one
      # warning, and nil. Without the extension, nil.
      def read(dir)
        text = text(dir) { |why| Warnings.once(:last_boot_read, why) } or return nil
        record = parse(text)
        return record if record.is_a?(Hash)

        Warnings.once(:last_boot_read, "#{File.join(dir, Native::LAST_BOOT_FILE)} is not used: #{record}")
        nil
      end

      # How and where the last boot ended its boot (["exit", objects]: it never said it had
      # booted; ["booted", objects], ["rails", objects]), if it was the program `key` names
      # (Loadscan::BootGC.key); else nil. `text` is the record the extension read at setup from
      # the cache dir it opened (trusted as `read` trusts the file, silently), read without JSON
      # (which the app may not load).
      def gc_end(text, key)
        text = text&.b or return nil
        return nil if text[/"boot_key":"(\h+)"/n, 1] != key

        by = text[/"boot_end_by":"(\w+)"/n, 1]
        objects = text[/"boot_end_objects":(\d+)/n, 1]
        by && objects ? [by, objects.to_i] : nil
      end

      # A boot's figures in one line: `record` is a last boot's (`read`) or this boot's, with
      # String keys. `who: false` leaves out when, which program, pid and Ruby (the process's
      # own LOADSCAN_STATS=1 line).
      def describe(record, who: true)
        r = record
        count = ->(name) { r[name].is_a?(Numeric) ? r[name] : 0 }
        left = (r["left_to_ruby"].is_a?(Hash) ? r["left_to_ruby"] : {}).select { |_, n| n.is_a?(Integer) && n.positive? }
        why = left.empty? ? "" : " (#{left.map { |reason, n| "#{n} #{reason.to_s.tr("_", " ")}" }.join(", ")})"
        setup_ms = r["setup_ms"].is_a?(Numeric) ? r["setup_ms"] : %w[cache_load_ms expand_ms sync_ms].sum(&count) # older records
        env = (r["environment"].is_a?(Hash) ? r["environment"] : {}).select { |_, v| v.is_a?(String) }
        env = env.map { |k, v| ", #{k}=#{v}" }.join
        "#{"#{r["at"]} #{r["program"]} (pid #{r["pid"]}, Ruby #{r["ruby"]}#{env}): " if who}" \
          "#{count.("hits")} requires answered from the index, #{count.("misses")} misses, " \
          "#{count.("deferred")} left to Ruby#{why}; engaged: #{r["engaged"] ? "yes" : "no"}; " \
          "#{count.("load_path_entries")} entries (#{count.("roots_from_cache")} from the cache, " \
          "#{count.("roots_scanned") + count.("roots_refreshed")} listed, #{count.("dirs_listed_lazily")} dirs listed on demand); " \
          "setup #{format("%.1f", setup_ms)} ms; cache #{r["cache"]}"
      end

      # The boot's GC in one line (its figures: Loadscan.stats[:gc] or a record's "gc").
      def describe_gc(gc)
        g = gc.to_h.transform_keys(&:to_s)
        return "GC: no figures" unless g["runs"].is_a?(Integer)

        before = g["runs_before_setup"].to_i
        deferral = if g["deferred"] then "deferred from setup, #{g["budget_runs"]} budget runs"
                   else "not deferred#{" (#{g["not_deferred"]})" if g["not_deferred"]}"
                   end
        ended = g["ended_by"] ? "ended by #{g["ended_by"]} after #{g["boot_ms"]} ms" : "not ended yet"
        "GC in the boot: #{g["runs"]} runs (#{g["minor"]} minor, #{g["major"]} major; #{g["time_ms"]} ms), " \
          "#{before} of them before setup (#{g["time_ms_before_setup"]} ms); #{deferral}; boot #{ended}; " \
          "#{g["allocated_objects"]} objects allocated; #{g["runs_after_boot"]} runs since"
      end

      # What the compile cache did in a boot, in one line (its figures: Loadscan.stats[:compile_cache]
      # or a record's "compile_cache"); nil when it had none (off, or an older record).
      def describe_compile_cache(figures)
        f = figures.to_h.transform_keys(&:to_s)
        return nil unless f["hits"].is_a?(Integer)

        kb = ->(n) { format("%.0f KB", n.to_i / 1024.0) }
        "compile cache: #{f["hits"]} files served (#{kb.(f["bytes_read"])}), #{f["misses"]} compiled by Ruby, " \
          "#{f["bypasses"]} bypassed; #{f["entries"]} entries read, #{f["bytes_written"].to_i.positive? ? "#{kb.(f["bytes_written"])} written" : "nothing written"}"
      end

      private

      # The record's text, or nil: none, no extension, or refused (then the block gets why).
      def text(dir)
        return nil unless Native.available?

        text, why = Native.read_last_boot(dir)
        yield why if why && block_given?
        text # UTF-8 text: the extension refuses a record that is not (CacheFile#read_last_boot)
      end

      # The record, a JSON object; else why not.
      def parse(json)
        require "json"
        record = JSON.parse(json)
        record.is_a?(Hash) ? record : "not a JSON object"
      rescue JSON::ParserError => e
        "not JSON (#{e.message.lines.first.to_s.chomp[0, 80]})"
      end
    end
  end
end
