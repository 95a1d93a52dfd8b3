# frozen_string_literal: true

module Loadscan
  module CoreExt
    # `$LOAD_PATH.resolve_feature_path(feature)` answered from the index: Ruby's own method
    # searches every entry as `require` does (ignoring `$LOADED_FEATURES`), and Ruby 3.3's
    # bundled-gems warning (installed by Bundler) asks it on every `require` of a few features.
    # The decorator (`Loadscan::Native::Decorator#resolve_feature_path`, a C function) answers
    # exactly what Ruby would, and hands the rest to Ruby's method, kept under another name.
    module LoadPath
      ORIGINAL = :loadscan_resolve_feature_path

      class << self
        def attach
          owner = $LOAD_PATH.singleton_class
          return false unless owner.method_defined?(:resolve_feature_path, false)
          return true if owner.private_method_defined?(ORIGINAL, false)

          owner.send(:alias_method, ORIGINAL, :resolve_feature_path)
          owner.send(:private, ORIGINAL)
          owner.send(:define_method, :resolve_feature_path, Native::Decorator.instance_method(:resolve_feature_path))
          true
        end

        # Ruby's own answer, searching the disk (the CLI and tests compare with it).
        def ruby_resolve_feature_path(feature)
          $LOAD_PATH.respond_to?(ORIGINAL, true) ? $LOAD_PATH.send(ORIGINAL, feature) : $LOAD_PATH.resolve_feature_path(feature)
        end
      end
    end
  end
end
