# frozen_string_literal: true

module Loadscan
  module TestSupport
    # For a test program: an entry object for `$LOAD_PATH` whose `to_path` runs `action` on its first
    # call only (Ruby code that runs while loadscan holds its state).
    ENTRY = <<~RUBY
      class Entry
        def initialize(path, &action) = (@path, @action = path, action)
        def to_path
          action, @action = @action, nil
          action&.call
          @path
        end
      end
    RUBY
  end
end
