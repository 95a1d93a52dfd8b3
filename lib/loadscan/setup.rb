# frozen_string_literal: true

# The one line for config/boot.rb (after `require "bundler/setup"`):
#
#   require "loadscan/setup"
require_relative "../loadscan"

Loadscan.setup
