# frozen_string_literal: true

module Loadscan
  # The few events worth a hook, each with a Hash payload:
  #
  #   :cache_load   at setup    {cache_dir:, roots_from_cache:, roots_scanned:, ms:, warning:}
  #   :cache_write  at save     {cache_dir:, result: :written | :clean | :failed | :skipped}
  #
  # `Loadscan.instrumentation = ->(event, payload) { … }` receives them; when
  # ActiveSupport::Notifications is loaded they are also published as "cache_load.loadscan" and
  # "cache_write.loadscan". A hook that raises is reported once and never breaks a boot. Which
  # requires the index left to Ruby, and why, is counted in `Loadscan.stats[:left_to_ruby]`.
  module Instrumentation
    class << self
      # Calls `hook` (the callable given to Loadscan.instrumentation=, or nil) and publishes.
      def publish(hook, event, payload)
        hook&.call(event, payload)
        ActiveSupport::Notifications.instrument("#{event}.loadscan", payload) if defined?(ActiveSupport::Notifications)
      rescue StandardError => e
        Warnings.once(:instrumentation, "an instrumentation hook raised #{e.class} (#{e.message}) on #{event}; ignored")
      end
    end
  end
end
