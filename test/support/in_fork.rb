# frozen_string_literal: true

module Loadscan
  module TestSupport
    # Global setup (Loadscan.setup, ENV, chdir) tested in process, inside a fork, as Bootsnap's
    # tests do: the block runs in a child whose state dies with it; its value comes back
    # Marshal'd, and an exception in it fails the test here. What the child warned (or wrote to
    # $stderr) is the test's as if warned here: unexpected unless inside `assert_warns`.
    module InFork
      def in_fork
        reader, writer = IO.pipe
        pid = fork do
          reader.close
          sink = Guard.sink || []
          before = [sink.size, $stderr.is_a?(StringIO) ? $stderr.string.size : 0]
          result = begin
            [:ok, yield]
          rescue Exception => e # rubocop:disable Lint/RescueException
            [:error, "#{e.class}: #{e.message}\n#{e.backtrace&.first(8)&.join("\n")}"]
          end
          written = $stderr.is_a?(StringIO) ? $stderr.string[before[1]..] : ""
          writer.binmode.write(Marshal.dump(result + [sink[before[0]..] + (written.empty? ? [] : [written])]))
          writer.close
          exit!(0) # no at_exit: neither loadscan's cache write nor minitest's run
        end
        writer.close
        data = reader.binmode.read
        reader.close
        _, status = Process.wait2(pid)
        assert status.success?, "the forked child failed: #{status.inspect}"
        kind, value, warned = Marshal.load(data) # rubocop:disable Security/MarshalLoad
        Guard.sink&.concat(warned)
        flunk "in the forked child: #{value}" if kind == :error
        value
      end
    end
  end
end
