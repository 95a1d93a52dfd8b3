# frozen_string_literal: true

# The one line for config/boot.rb (after `require "bundler/setup"`):
#
#   require "loadscan/setup"
#
# (`loadscan install` also puts a first line before Bundler's, whose file, config/loadscan_boot.rb,
# requires this one by its absolute path from the copy Gemfile.lock names: then the line above
# finds it loaded.)

# LOADSCAN_PROFILE=path: the boot is profiled from here, loadscan's own load on (README, "Boot
# profile"), or LOADSCAN_PROFILE_EXEC: a profiled process `exec`ed this one; the recorder only, as
# `loadscan profile`'s profile/boot/start.rb loads it.
if ENV["LOADSCAN_PROFILE"] || ENV["LOADSCAN_PROFILE_EXEC"]
  require_relative "version"
  require_relative "profile"
  Loadscan::Profile.start_from_env(ENV["LOADSCAN_PROFILE"])
end
require_relative "../loadscan"

Loadscan.setup
