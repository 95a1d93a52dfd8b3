# frozen_string_literal: true

module Loadscan
  # The Rust extension (ext/loadscan), built for one Ruby: at `loadscan/<ruby minor>/loadscan.so`
  # beside this file, both in a checkout (`rake compile`, one build per Ruby) and in an
  # installed gem (extconf.rb installs it there). A build for another Ruby is never loaded: it
  # links that Ruby's libruby.
  module Native
    path = File.join(__dir__, RUBY_VERSION[/\A\d+\.\d+/], "loadscan.so")
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
