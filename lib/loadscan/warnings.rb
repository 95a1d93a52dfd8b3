# frozen_string_literal: true

require_relative "native"

module Loadscan
  # Every warning loadscan prints goes through here: each kind at most once per process.
  module Warnings
    @said = {}

    class << self
      def once(kind, message)
        return if @said[kind]

        @said[kind] = true
        Kernel.warn("loadscan: #{message}", uplevel: nil)
      end

      # Problems of the kinds the core calls quiet (`Native::QUIET_PROBLEM_KINDS`: dangling
      # symlinks, case-folding directories; `loadscan problems` and `doctor` list them) warn
      # nobody; loops and unreadable or oversized directories mean slower, Ruby-answered
      # requires below them.
      def scan_problems(problems)
        quiet = ::Loadscan::Native::QUIET_PROBLEM_KINDS
        problems = problems.reject { |kind, _| quiet.include?(kind) }.map { |_, message| message }
        return if problems.empty?

        shown = problems.first(3).join("; ")
        more = problems.size > 3 ? " and #{problems.size - 3} more (Loadscan.problems lists them)" : ""
        once(:scan, "left to Ruby's require: #{shown}#{more}")
      end
    end
  end
end
