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

      # Runs work whose failure must not fail the program around it: an instrumentation hook, or
      # a warning through an app's own `Warning.warn`, in the middle of a `require`. A
      # StandardError or ScriptError the work raises (a subscriber's bug, a `require` of its
      # that fails) is ignored, with one warning of `kind` naming it and `what` (none when that
      # warning fails too). Everything else goes on as if loadscan were not there: `throw`,
      # `exit`, `Thread#kill`, an Interrupt or a signal's SignalException, and whatever another
      # thread raises into this one meanwhile (`Thread#raise`, `Timeout`), which is held back
      # until the work is done so it is never mistaken for the work's own, then raised.
      def guarded(kind, what)
        Thread.handle_interrupt(StandardError => :never, ScriptError => :never) do
          yield
        rescue StandardError, ScriptError => e
          begin
            once(kind, "#{what} raised #{e.class} (#{e.message}); ignored")
          rescue StandardError, ScriptError
            nil # the warning's own channel failed: nothing left to say it with
          end
        end
      end
    end
  end
end
