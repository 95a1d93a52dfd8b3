# frozen_string_literal: true

module Loadscan
  VERSION = "0.1.0"
end
