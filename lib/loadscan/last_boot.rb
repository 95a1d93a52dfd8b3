# frozen_string_literal: true

module Loadscan
  # The figures of the last boot, kept beside the cache for `loadscan stats` and `doctor`:
  # written at exit by the process that set loadscan up (not by forked workers; the writer is
  # `Loadscan.record_last_boot`, so a boot compiles nothing more), as one JSON document replaced atomically,
  # only where the cache itself could be read or written (so the directory passed loadscan's
  # ownership and mode checks). This file reads it back, for the command line.
  #
  #   {"at":"2026-11-30T23:59:01Z","pid":4242,"program":"bin/rails","ruby":"3.1.2",
  #    "cache":"clean","engaged":true,"hits":1900,"misses":5,"left_to_ruby":{"missing":3},…}
  module LastBoot
    FILE = CACHE_FILES.fetch(1)

    class << self
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
    end
  end
end
