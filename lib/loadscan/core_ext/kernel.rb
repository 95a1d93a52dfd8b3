# frozen_string_literal: true

# The `require` decorator, installed where Ruby's own load-path search is reached:
#
# - under RubyGems, `Kernel#gem_original_require` (Ruby's C `require`, which RubyGems' `require`
#   calls after its own work: default-gem and dependency activation, which may change
#   `$LOAD_PATH`). RubyGems keeps seeing the feature exactly as given, so activation, its
#   `LoadError` retries and error messages are untouched; only the search below it is replaced;
# - without RubyGems (`--disable-gems`), `Kernel#require` itself;
# - always the singleton `Kernel.require` (Ruby's C function, which RubyGems leaves alone).
#
# Each decorated method resolves the feature from the index and requires the resulting
# absolute path with the original method, so Ruby still does the loading, the locking,
# `$LOADED_FEATURES` and the `true`/`false` result. When Ruby itself would answer `false`
# without loading anything (the feature and the file its search would reach are loaded), the
# decorator answers `false` at once. Where the index has no exact answer (not
# found, already loaded under some spelling, absolute or `./` paths, non-String arguments) the
# feature goes to the original untouched.
#
# Deliberately not intercepted: `require_relative` and `load` (they never search `$LOAD_PATH`
# by feature name). `autoload` reaches `Kernel#require` in Ruby 3.1 and is served through it.
module Loadscan
  module CoreExt
    # One body for every decorated method; `%<name>s` is the method's name.
    DECORATOR = <<~'RUBY'
      def %<name>s(feature)
        abspath = Loadscan::Native.resolve(feature)
        return false if abspath == false # already loaded: what Ruby would answer
        if abspath
          begin
            return loadscan_original_%<name>s(abspath)
          rescue LoadError => error
            # Raised while loading something else inside that file: not ours to second-guess.
            raise unless error.path == abspath
            # The indexed file vanished or became unreadable since the scan: Ruby decides below.
          end
        end
        loadscan_original_%<name>s(feature)
      end
    RUBY

    def self.decorate(owner, name)
      owner.alias_method(:"loadscan_original_#{name}", name)
      owner.send(:private, :"loadscan_original_#{name}")
      owner.class_eval(format(DECORATOR, name: name), __FILE__, __LINE__)
      owner.send(:private, name) if owner == Kernel
    end
  end
end

Loadscan::CoreExt.decorate(Kernel, Kernel.private_method_defined?(:gem_original_require) ? :gem_original_require : :require)
Loadscan::CoreExt.decorate(Kernel.singleton_class, :require)
