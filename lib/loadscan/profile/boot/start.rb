# frozen_string_literal: true

# `loadscan profile` starts its child with `RUBYOPT=-r<this file>` and LOADSCAN_PROFILE=path: the
# profile starts here, before the app's boot loads anything (Bundler, the app's loadscan), and is
# written at exit. Loads the profile's recorder only: not loadscan nor its extension.
require_relative "../../version"
require_relative "../../profile"

Loadscan::Profile.start_from_env(ENV["LOADSCAN_PROFILE"])
