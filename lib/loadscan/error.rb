# frozen_string_literal: true

module Loadscan
  # Base class of loadscan's errors. Nothing in the boot path raises it: any problem there
  # degrades to Ruby's own require with a warning.
  class Error < StandardError; end
end
