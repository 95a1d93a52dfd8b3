# frozen_string_literal: true

# The `require` decorator. `module_function` defines the new method both as the private
# instance method (`Kernel#require`, what a bare `require` calls — RubyGems' version until now)
# and as the singleton `Kernel.require` (Ruby's C function): each alias keeps its own original.
#
# It resolves the feature from the index and requires the resulting absolute path, so Ruby
# still does the loading, the locking, `$LOADED_FEATURES` and the `true`/`false` result. Where
# the index has no exact answer (not found, already loaded under some spelling, absolute or
# `./` paths, non-String arguments, RubyGems about to activate a gem) the feature goes to the
# original `require` untouched, so LoadError messages and gem activation are Ruby's own.
#
# Deliberately not intercepted: `require_relative` and `load` (they never search
# `$LOAD_PATH` by feature name). `autoload` reaches `Kernel#require` in Ruby 3.1 and is
# served like any other require.
module Kernel
  module_function

  alias_method :loadscan_original_require, :require
  class << self
    alias_method :loadscan_original_require, :require
  end

  def require(feature)
    abspath = Loadscan::Native.resolve(feature)
    if abspath && !Loadscan::RubygemsGuard.defer?(feature)
      begin
        return loadscan_original_require(abspath)
      rescue LoadError => error
        # Raised while loading something else inside that file: not ours to second-guess.
        raise unless error.path == abspath
        # The indexed file vanished or became unreadable since the scan: Ruby decides below.
      end
    end
    loadscan_original_require(feature)
  end
end
