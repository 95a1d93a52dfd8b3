# frozen_string_literal: true

module Loadscan
  # The figures of the last boot, kept beside the cache for `loadscan stats` and `doctor`:
  # written at exit by the process that set loadscan up (not by forked workers; the extension
  # writes it, as it writes the cache), as one JSON document replaced atomically,
  # only where the cache itself could be read or written (so the directory passed loadscan's
  # ownership and mode checks). This file reads it back, for the command line.
  #
  #   {"at":"2026-11-30T23:59:01Z","pid":4242,"program":"bin/rails","ruby":"3.1.2",
  #    "cache":"clean","engaged":true,"hits":1900,"misses":5,"left_to_ruby":{"missing":3},…}
  module LastBoot
    # The largest record read: one is a few hundred bytes.
    MAX_BYTES = 64 << 10

    class << self
      # The last record in `dir` as a Hash with String keys, or nil when there is none. It is
      # trusted as the cache file is: opened without following a symlink or blocking (a fifo),
      # and read only if it is a regular file of at most MAX_BYTES, owned by this user or root
      # and writable by no one else. Anything else: one warning, and nil. Without the extension
      # (which names the files), nil.
      def read(dir)
        return nil unless Native.available?

        path = File.join(dir, Native::CACHE_FILES.fetch(1))
        record = open(path) { |f| refusal(f.stat) || parse(f.read(MAX_BYTES + 1)) }
        return record if record.is_a?(Hash)

        Warnings.once(:last_boot_read, "#{path} is not used: #{record}")
        nil
      rescue Errno::ENOENT, Errno::ENOTDIR
        nil
      rescue Errno::ELOOP
        Warnings.once(:last_boot_read, "#{path} is not used: it is a symlink")
        nil
      rescue SystemCallError, IOError => e
        Warnings.once(:last_boot_read, "#{path} could not be read (#{e.message})")
        nil
      end

      # The objects the last boot had allocated when it exited (its GC figures), if it was the
      # program `key` names (Loadscan::BootGC.key) and it never said it had booted (then the
      # next boot will say so again); else nil. Read at setup, trusted as `read` trusts the file,
      # but silently and without JSON (which the app may not load).
      def gc_mark(dir, key)
        text = open(File.join(dir, Native::CACHE_FILES.fetch(1))) { |f| refusal(f.stat) ? "" : f.read(MAX_BYTES + 1) }
        return nil if text.bytesize > MAX_BYTES || text[/"boot_key":"(\h+)"/, 1] != key || !text.include?('"boot_end_by":"exit"')

        text[/"boot_end_objects":(\d+)/, 1]&.to_i
      rescue SystemCallError, IOError
        nil
      end

      private def open(path, &block)
        File.open(path, File::RDONLY | File::NOFOLLOW | File::NONBLOCK, &block)
      end

      # Why a file with this status is not read, or nil.
      private def refusal(st)
        return "not a regular file (#{st.ftype})" unless st.file?
        return "owned by uid #{st.uid}, not by root or uid #{Process.euid}" unless [0, Process.euid].include?(st.uid)
        return format("writable by group or others (mode %o)", st.mode & 0o777) if st.mode.anybits?(0o022)

        "larger than #{MAX_BYTES} bytes" if st.size > MAX_BYTES
      end

      # The record, a JSON object; else why not.
      private def parse(json)
        return "larger than #{MAX_BYTES} bytes" if json.to_s.bytesize > MAX_BYTES

        require "json"
        record = JSON.parse(json.to_s)
        record.is_a?(Hash) ? record : "not a JSON object"
      rescue JSON::ParserError => e
        "not JSON (#{e.message.lines.first.to_s.chomp[0, 80]})"
      end

      # One line for people: when, what ran, what the index answered and what it left to Ruby.
      def describe(last)
        left = last["left_to_ruby"].is_a?(Hash) ? last["left_to_ruby"] : {}
        left = left.select { |_, n| n.is_a?(Integer) && n.positive? }.map { |why, n| "#{n} #{why}" }
        "#{last["at"]} #{last["program"]} (pid #{last["pid"]}, Ruby #{last["ruby"]}): " \
          "#{last["hits"]} requires answered from the index, #{last["misses"]} misses, " \
          "#{last["deferred"]} left to Ruby#{left.empty? ? "" : " (#{left.join(", ")})"}; " \
          "engaged: #{last["engaged"] ? "yes" : "no"}; #{last["load_path_entries"]} entries " \
          "(#{last["roots_from_cache"]} from the cache); cache #{last["cache"]}"
      end

      # The boot's GC in one line (its figures: Loadscan.stats[:gc] or a record's "gc").
      def describe_gc(gc)
        g = gc.to_h.transform_keys(&:to_s)
        return "GC: no figures" unless g["runs"].is_a?(Integer)

        before = g["runs_before_setup"].to_i
        deferral = if g["deferred"] then "deferred from setup, #{g["budget_runs"]} budget runs"
                   else "not deferred"
                   end
        ended = g["ended_by"] ? "ended by #{g["ended_by"]} after #{g["boot_ms"]} ms" : "not ended yet"
        "GC in the boot: #{g["runs"]} runs (#{g["minor"]} minor, #{g["major"]} major; #{g["time_ms"]} ms), " \
          "#{before} of them before setup (#{g["time_ms_before_setup"]} ms); #{deferral}; boot #{ended}; " \
          "#{g["allocated_objects"]} objects allocated; #{g["runs_after_boot"]} runs since"
      end
    end
  end
end
