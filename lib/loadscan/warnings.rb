# frozen_string_literal: true

module Loadscan
  # Every warning loadscan prints goes through here: each kind at most once per process.
  module Warnings
    @said = {}

    # Scan problems that warn nobody: see `scan_problems`.
    QUIET = %i[dangling case_folding].freeze

    class << self
      def once(kind, message)
        return if @said[kind]

        @said[kind] = true
        Kernel.warn("loadscan: #{message}", uplevel: nil)
      end

      # Dangling symlinks are harmless (Ruby cannot open them either) and stay quiet, and so do
      # directories whose names fold case (a case-insensitive mount is a setup, not a fault;
      # `loadscan problems` and `doctor` list them); loops and unreadable or oversized
      # directories mean slower, Ruby-answered requires below them.
      def scan_problems(problems)
        problems = problems.reject { |kind, _| QUIET.include?(kind) }.map { |_, message| message }
        return if problems.empty?

        shown = problems.first(3).join("; ")
        more = problems.size > 3 ? " and #{problems.size - 3} more (Loadscan.problems lists them)" : ""
        once(:scan, "left to Ruby's require: #{shown}#{more}")
      end
    end
  end
end
