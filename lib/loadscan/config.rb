# frozen_string_literal: true

module Loadscan
  # Settings, from keywords to `Loadscan.setup` or else LOADSCAN_* environment variables:
  #
  #   LOADSCAN_DISABLE=1    leave require alone (setup does nothing)
  #   LOADSCAN_THREADS=N    scanner threads (default: the CPU count, at most 8)
  class Config
    attr_reader :enabled, :threads, :dlext

    def initialize(enabled: nil, threads: nil, env: ENV)
      @enabled = enabled.nil? ? !truthy?(env["LOADSCAN_DISABLE"]) : enabled
      @threads = Integer(threads || env["LOADSCAN_THREADS"] || 0)
      raise ConfigError, "threads must be 0 (automatic) or more, got #{@threads}" if @threads.negative?
      # RbConfig is loaded whenever RubyGems is; without it the extension's own default applies.
      @dlext = defined?(RbConfig) ? RbConfig::CONFIG["DLEXT"] : ""
    rescue ArgumentError => e
      raise ConfigError, "LOADSCAN_THREADS: #{e.message}"
    end

    private

    def truthy?(value)
      !value.nil? && !%w[0 false no off].include?(value.downcase) && !value.empty?
    end
  end
end
