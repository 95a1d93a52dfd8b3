# frozen_string_literal: true

module Loadscan
  # The Rust extension (ext/loadscan). An installed gem has it at
  # `loadscan/<ruby minor>/loadscan.so` or `loadscan/loadscan.so`; a checkout after
  # `rake compile` at `lib/loadscan/loadscan.so`.
  module Native
    candidates = [
      File.join(__dir__, RUBY_VERSION[/\A\d+\.\d+/], "loadscan.so"),
      File.join(__dir__, "loadscan.so"),
    ]
    begin
      path = candidates.find { |c| File.file?(c) } or raise LoadError, "no loadscan.so in #{__dir__} (run `rake compile`)"
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
