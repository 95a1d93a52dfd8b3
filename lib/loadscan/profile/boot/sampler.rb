# frozen_string_literal: true

module Loadscan
  class Profile
    # The stack sampler of a profile (ext/loadscan/src/sampler.rs): from `start` to `stop`, every
    # INTERVAL_US a native thread has Ruby take a sample of the profiled thread's stack at its
    # next interrupt check, kept for Profile::Samples to turn into :call entries once the profile
    # ends. Needs the extension (loaded here if the boot has not: it sets nothing up) and Ruby
    # 3.3 or later (`rb_postponed_job_trigger`); without either there are no samples, and the
    # time an entry spends in other gems' code stays the entry's own (so too with
    # LOADSCAN_PROFILE_SAMPLES=off; a number sets the interval in µs). Nothing of it exists while no profile records: no thread, no hook.
    module Sampler
      INTERVAL_US = 1000

      module_function

      # Starts sampling the current thread; true when it runs. `files`: the profile's own
      # files, whose frames end what a sample keeps.
      def start(files)
        interval = ENV["LOADSCAN_PROFILE_SAMPLES"].to_s.empty? ? INTERVAL_US : Integer(ENV["LOADSCAN_PROFILE_SAMPLES"], exception: false)
        return false unless interval&.positive? # "off"

        native = self.native or return false
        native.start_sampler(interval, files)
      rescue StandardError, LoadError
        false
      end

      # Stops it: `[samples, frames]` (Profile::Samples reads them), or nil.
      def stop
        native&.stop_sampler
      end

      def native
        require_relative "../../native" unless defined?(::Loadscan::Native.available?)
        ::Loadscan::Native.available? && ::Loadscan::Native.respond_to?(:start_sampler) ? ::Loadscan::Native : nil
      rescue LoadError
        nil
      end
    end
  end
end
