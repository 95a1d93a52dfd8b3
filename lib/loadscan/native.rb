# frozen_string_literal: true

module Loadscan
  # The Rust extension (ext/loadscan), built for one Ruby: at
  # `loadscan/<ruby minor>/loadscan.<DLEXT>` beside this file (`.so`, `.bundle` on macOS), both in
  # a checkout (`rake compile`, one build per Ruby) and in an installed gem (extconf.rb installs it
  # there; a precompiled gem holds one per Ruby it supports, from `rake native`). A build for
  # another Ruby is never loaded: it links that Ruby's libruby. Without RbConfig
  # (`--disable-gems`, not loaded for us), DLEXT is what Ruby's configure gives the platform.
  module Native
    # What lib/ uses of the library. A build that lacks any of it is one of another loadscan (a
    # checkout pulled without `rake compile`) and is not used: loadscan stays off with one
    # warning. (native_test checks these lists against what the extension defines.)
    FUNCTIONS = %i[start stop save finish set_readonly relist_racy read_last_boot clear_cache lookup problems stats
                   probes explain stems unseeded_hash hold_for_fork release_after_fork start_ticker stop_ticker
                   ticker_state speedscope start_sampler stop_sampler start_gc_clock gc_clock stop_gc_clock
                   copy_xattrs compile_cache_start compile_cache_flags= compile_cache_stop compile_cache_compiled
                   compile_cache_pending compile_cache_source compile_cache_finish compile_cache_stats].freeze
    CONSTANTS = %i[Decorator CompileCache PROBE CACHE_FILE LAST_BOOT_FILE ISEQ_FILE VALIDATIONS PROBLEM_KINDS
                   QUIET_PROBLEM_KINDS SPEEDSCOPE_VERSION DEFAULT_IGNORE_DIRS DEFAULT_LAZY].freeze

    dlext = defined?(RbConfig) ? RbConfig::CONFIG["DLEXT"] : (RUBY_PLATFORM.include?("darwin") ? "bundle" : "so")
    dir = File.join(__dir__, RUBY_VERSION[/\A\d+\.\d+/])
    path = File.join(dir, "loadscan.#{dlext}")
    begin
      unless File.file?(path)
        # The source gem installed where no Rust toolchain was found leaves a note instead.
        require_relative "not_built"
        @not_built = NotBuilt.reason(dir)
        raise LoadError, NotBuilt.message(@not_built) if @not_built

        raise LoadError, "no #{path}: no build for Ruby #{RUBY_VERSION} (in a checkout, run `rake compile` " \
                         "with this Ruby; a precompiled gem: install the source gem, `gem install loadscan --platform ruby`)"
      end
      require path
      lacks = FUNCTIONS.reject { |f| respond_to?(f) }.map { |f| "Native.#{f}" } +
              CONSTANTS.reject { |c| const_defined?(c, false) }.map { |c| "Native::#{c}" }
      unless lacks.empty?
        raise LoadError, "#{path} is a build of another version of loadscan (it lacks #{lacks.first(3).join(", ")}" \
                         "#{lacks.size > 3 ? ", …" : ""}): rebuild it (`rake compile` with this Ruby in a checkout, " \
                         "`gem pristine loadscan` for an installed gem)"
      end
      @load_error = nil
    rescue LoadError => e
      @load_error = e
    end

    class << self
      # The LoadError that kept the extension from loading, or nil.
      attr_reader :load_error
      # Why the source gem's install built no extension (its message says how to get one), or nil.
      attr_reader :not_built

      def available?
        @load_error.nil?
      end
    end
  end
end
