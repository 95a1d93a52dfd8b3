# frozen_string_literal: true

# The one line for config/boot.rb (after `require "bundler/setup"`):
#
#   require "loadscan/setup"
#
# (`loadscan install` also puts a first line before Bundler's, whose file, config/loadscan_boot.rb,
# requires this one by its absolute path from the copy Gemfile.lock names: then the line above
# finds it loaded.)
require_relative "../loadscan"

Loadscan.setup
