# frozen_string_literal: true

module Loadscan
  # The figures of the last boot, kept beside the cache for `loadscan stats` and `doctor`:
  # written at exit by the process that set loadscan up (not by forked workers), as one small
  # JSON document replaced atomically, only where the cache itself could be read or written (so
  # the directory passed loadscan's ownership and mode checks).
  #
  #   {"at":"2026-11-30T23:59:01Z","pid":4242,"program":"bin/rails","ruby":"3.1.2",
  #    "cache":"clean","engaged":true,"hits":1900,"misses":5,"left_to_ruby":{"missing":3},…}
  module LastBoot
    FILE = CACHE_FILES.fetch(1)

    class << self
      # Replaces the record in `dir`. Raises SystemCallError when it cannot.
      def record(dir, stats, cache:)
        data = { "at" => Time.now.utc.strftime("%Y-%m-%dT%H:%M:%SZ"), "pid" => Process.pid, "program" => $PROGRAM_NAME,
                 "ruby" => RUBY_VERSION, "cache" => cache.to_s }.merge(stats.transform_keys(&:to_s))
        tmp = File.join(dir, ".#{FILE}.#{Process.pid}")
        # A name of our own, never followed if something planted a link there.
        File.open(tmp, File::WRONLY | File::CREAT | File::TRUNC | File::NOFOLLOW, 0o644) { |f| f.write(encode(data)) }
        File.rename(tmp, File.join(dir, FILE))
      rescue SystemCallError
        File.unlink(tmp) if tmp && File.file?(tmp)
        raise
      end

      # The last record in `dir` as a Hash with String keys, or nil when there is none (or it is
      # not ours to read).
      def read(dir)
        require "json"
        JSON.parse(File.read(File.join(dir, FILE)))
      rescue SystemCallError, JSON::ParserError
        nil
      end

      # One line for people: when, what ran, what the index answered and what it left to Ruby.
      def describe(last)
        left = (last["left_to_ruby"] || {}).select { |_, n| n.to_i.positive? }.map { |why, n| "#{n} #{why}" }
        "#{last["at"]} #{last["program"]} (pid #{last["pid"]}, Ruby #{last["ruby"]}): " \
          "#{last["hits"]} requires answered from the index, #{last["misses"]} misses, " \
          "#{last["deferred"]} left to Ruby#{left.empty? ? "" : " (#{left.join(", ")})"}; " \
          "engaged: #{last["engaged"] ? "yes" : "no"}; #{last["load_path_entries"]} entries " \
          "(#{last["roots_from_cache"]} from the cache); cache #{last["cache"]}"
      end

      # JSON for numbers, strings, symbols, booleans, nil, hashes and arrays: enough for stats,
      # without loading the json library in every process at exit.
      def encode(value)
        case value
        when Hash then "{#{value.map { |k, v| "#{encode(k.to_s)}:#{encode(v)}" }.join(",")}}"
        when Array then "[#{value.map { |v| encode(v) }.join(",")}]"
        when String, Symbol then encode_string(value.to_s)
        when Integer, true, false then value.to_s
        when Float then value.finite? ? value.round(3).to_s : "null"
        when nil then "null"
        else encode_string(value.to_s)
        end
      end

      private def encode_string(str)
        str = str.encode(Encoding::UTF_8, invalid: :replace, undef: :replace)
        escaped = str.gsub(/["\\\u0000-\u001f]/) { |c| c == '"' || c == "\\" ? "\\#{c}" : format("\\u%04x", c.ord) }
        "\"#{escaped}\""
      end
    end
  end
end
