# frozen_string_literal: true

module Loadscan
  module TestSupport
    # Where a run's time goes, by test file: after minitest's summary, the files that took
    # longest (their tests' own time, setup and teardown included), so `bin/test` shows on every
    # Ruby what each file costs (LOADSCAN_TEST_TIMES=N lists N of them, 0 none; default 12).
    class FileTimes < Minitest::AbstractReporter
      def initialize(io, most)
        super()
        @io = io
        @most = most
        @times = Hash.new(0.0)
        @runs = Hash.new(0)
      end

      def record(result)
        file = result.source_location.first
        @times[file] += result.time
        @runs[file] += 1
      end

      def report
        return if @most.zero? || @times.empty?

        top = @times.max_by(@most, &:last)
        total = @times.values.sum
        @io.puts format("Slowest test files (%d of %d, %.1f s of %.1f s):", top.size, @times.size, top.sum(&:last), total)
        top.each do |file, seconds|
          @io.puts format("  %7.1f s  %4d tests  %s", seconds, @runs[file], file.delete_prefix("#{Dir.pwd}/"))
        end
      end
    end
  end
end

module Minitest
  def self.plugin_loadscan_file_times_init(options)
    most = Integer(ENV.fetch("LOADSCAN_TEST_TIMES", "12"), exception: false) || 12
    reporter << Loadscan::TestSupport::FileTimes.new(options[:io], most)
  end
end
Minitest.extensions << "loadscan_file_times"
