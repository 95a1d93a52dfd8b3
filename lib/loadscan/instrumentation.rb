# frozen_string_literal: true

module Loadscan
  # The few events worth a hook, each with a Hash payload:
  #
  #   :cache_load   at setup    {cache_dir:, roots_from_cache:, roots_scanned:, ms:, warning:}
  #   :cache_write  at save     {cache_dir:, result: :written | :clean | :failed | :skipped}
  #   :require_left_to_ruby     {feature:, reason:} for each `require` the index left to Ruby's
  #                 own (reason: a `Loadscan.stats[:left_to_ruby]` key, e.g. :blind_spot); to the
  #                 hook only (see below)
  #   :rescan       {roots_scanned:, roots_refreshed:, ms:} when a `$LOAD_PATH` change after setup
  #                 made loadscan list entries (reported at the next require); to the hook only
  #
  # `Loadscan.instrumentation = ->(event, payload) { … }` receives them; when
  # ActiveSupport::Notifications is loaded the cache events are also published as
  # "cache_load.loadscan" and "cache_write.loadscan" (not :require_left_to_ruby and :rescan, which
  # happen inside the app's requires, where AS::Notifications' first use would load files of its
  # own).
  # A hook that raises is reported once and never breaks a boot; an interrupt that arrives while
  # it runs (`Timeout`, `Thread#raise`, a signal, `Thread#kill`) is raised from where it was
  # published, once it is done. `Loadscan.stats[:left_to_ruby]`
  # counts the requires left to Ruby.
  module Instrumentation
    class << self
      # Calls `hook` (the callable given to Loadscan.instrumentation=, or nil) and publishes.
      # What fails in there (a LoadError of a file the hook or AS::Notifications loads too) is one
      # warning; an interrupt goes on (Warnings.guarded). An event of the hook's own doing (a
      # `require` it makes, left to Ruby) is not published again while it runs: that would call
      # the hook from itself, without end.
      def publish(hook, event, payload, notify: true)
        return if Thread.current[:loadscan_publishing]

        begin
          Thread.current[:loadscan_publishing] = true
          Warnings.guarded(:instrumentation, "an instrumentation hook on #{event}") do
            hook&.call(event, payload)
            ActiveSupport::Notifications.instrument("#{event}.loadscan", payload) if notify && defined?(ActiveSupport::Notifications)
          end
        ensure
          Thread.current[:loadscan_publishing] = false
        end
      end
    end
  end
end
