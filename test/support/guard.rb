# frozen_string_literal: true

require "stringio"

module Loadscan
  module TestSupport
    # What zeitwerk's test helper does: a test fails when it made no assertion, and when it
    # warned (Warning.warn, so Kernel#warn and loadscan's Warnings) or wrote to $stderr without
    # saying it expects to (`assert_warns`). Failing tests, errors and skips are left alone.
    module Guard
      # Sends Warning.warn to the running test's list instead of $stderr.
      module CaptureWarnings
        def warn(message, category: nil, **kwargs)
          sink = Guard.sink
          return super unless sink
          return nil if category && !Warning[category] # Ruby's own drops it (3.3 calls it anyway)

          sink << message
          nil
        end
      end

      class << self
        attr_accessor :sink
      end

      Warning.singleton_class.prepend(CaptureWarnings)

      def before_setup
        @guard_warnings = Guard.sink = []
        @guard_stderr = $stderr
        $stderr = StringIO.new
        super
      end

      def after_teardown
        written = $stderr.is_a?(StringIO) ? $stderr.string : ""
        $stderr = @guard_stderr
        Guard.sink = nil
        super
        return unless passed?

        flunk_unless_quiet(@guard_warnings, written)
        flunk "#{self.class}##{name} made no assertion" if assertions.zero?
      end

      # Runs the block and asserts it warned `count` times, each warning matching `pattern`;
      # those warnings are expected, not a failure. Returns the block's value.
      def assert_warns(pattern, count: 1)
        before = @guard_warnings.size
        value = yield
        said = @guard_warnings.slice!(before..)
        assert_equal count, said.size, "expected #{count} warning(s) matching #{pattern.inspect}, got: #{said.inspect}"
        said.each { |w| assert_match pattern, w }
        value
      end

      private

      def flunk_unless_quiet(warnings, written)
        return if warnings.empty? && written.empty?

        flunk ["#{self.class}##{name} warned unexpectedly (use assert_warns where a warning is expected):",
               *warnings, written].reject(&:empty?).join("\n")
      end
    end
  end
end
