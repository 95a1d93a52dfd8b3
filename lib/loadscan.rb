# frozen_string_literal: true

# loadscan: a load-path cache for Ruby's `require`, with a Rust core.
#
# The table of contents, in load order:
require_relative "loadscan/version"
require_relative "loadscan/error"
require_relative "loadscan/native"
require_relative "loadscan/config"
require_relative "loadscan/warnings"
require_relative "loadscan/rubygems_guard"

module Loadscan
  class << self
    # The configuration in effect after setup (nil before).
    attr_reader :config

    # Starts resolving `require` from the index. Safe to call more than once; returns true when
    # loadscan is active, false when it stays out of the way (disabled, or the native extension
    # could not load — then with one warning, and Ruby's require is untouched).
    def setup(**options)
      return true if @active

      @config = Config.new(**options)
      return false unless @config.enabled

      unless Native.available?
        Warnings.once(:native, "native extension could not be loaded (#{Native.load_error.message}); booting with Ruby's own require")
        return false
      end

      Native.start($LOAD_PATH, @config.dlext, @config.threads)
      Native.sync
      require_relative "loadscan/core_ext/kernel"
      @active = true
    end

    # Whether `require` currently goes through loadscan.
    def active?
      @active == true
    end

    # The file `require(feature)` would load according to the index, ignoring what is already
    # loaded (compare `$LOAD_PATH.resolve_feature_path`): an absolute path, `:missing` when no
    # entry has it, or `:unknown` when Ruby's own require has to decide.
    def lookup(feature)
      active? ? Native.lookup(feature) : :unknown
    end

    # Counters: entries scanned, features indexed, scans run, load-path entries followed.
    def stats
      active? ? Native.stats : nil
    end

    # Everything the scanner worked around, as `[kind, message]` pairs (`:loop`, `:unreadable`,
    # `:dangling`, …): lookups below those paths go to Ruby's require.
    def problems
      active? ? Native.problems : []
    end

    # Stops answering from the index; `require` behaves as stock Ruby. For tests.
    def teardown
      Native.stop if Native.available?
      @active = false
    end
  end
end
