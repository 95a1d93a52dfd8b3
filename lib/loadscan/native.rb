# frozen_string_literal: true

module Loadscan
  # The Rust extension (ext/loadscan), built for one Ruby: at
  # `loadscan/<ruby minor>/loadscan.<DLEXT>` beside this file (`.so`, `.bundle` on macOS), both in
  # a checkout (`rake compile`, one build per Ruby) and in an installed gem (extconf.rb installs it
  # there; a precompiled gem holds one per Ruby it supports, from `rake native`). A build for
  # another Ruby is never loaded: it links that Ruby's libruby. Without RbConfig
  # (`--disable-gems`, not loaded for us), DLEXT is what Ruby's configure gives the platform.
  module Native
    dlext = defined?(RbConfig) ? RbConfig::CONFIG["DLEXT"] : (RUBY_PLATFORM.include?("darwin") ? "bundle" : "so")
    path = File.join(__dir__, RUBY_VERSION[/\A\d+\.\d+/], "loadscan.#{dlext}")
    begin
      File.file?(path) or raise LoadError, "no #{path}: no build for Ruby #{RUBY_VERSION} (in a checkout, run `rake compile` " \
                                             "with this Ruby; a precompiled gem: install the source gem, `gem install loadscan --platform ruby`)"
      require path
      @load_error = nil
    rescue LoadError => e
      @load_error = e
    end

    class << self
      # The LoadError that kept the extension from loading, or nil.
      attr_reader :load_error

      def available?
        @load_error.nil?
      end
    end
  end
end
