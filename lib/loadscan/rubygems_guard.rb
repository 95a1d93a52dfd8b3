# frozen_string_literal: true

module Loadscan
  # RubyGems' `require` does more than search the load path in two cases, and there the
  # feature is handed to it unresolved so it can do exactly what it always does:
  #
  # - a default gem (json, set, …) not activated yet: RubyGems activates it first;
  # - unresolved gem dependencies: RubyGems may activate a gem that provides the feature,
  #   which inserts that gem's dirs in front of the ones loadscan would pick from.
  #
  # Under Bundler neither happens after `bundler/setup`, so this costs one Hash lookup.
  module RubygemsGuard
    def self.defer?(feature)
      return false unless defined?(::Gem::Specification) && ::Gem.respond_to?(:find_unresolved_default_spec)

      !::Gem::Specification.unresolved_deps.empty? || !::Gem.find_unresolved_default_spec(feature).nil?
    end
  end
end
