# frozen_string_literal: true
# The floor any load-path cache can reach: `require` resolves each feature with one Hash
# lookup in a map recorded by an earlier stock boot of the same fixture (bench/preludes/record.rb,
# path in BENCH_RECORDED_MAP), then requires the absolute path; a miss goes to the original
# require. A feature this prelude already required successfully returns false at once (as
# Bootsnap's loaded-features index does: Rails re-requires thousands of loaded features).
# No scan, no validation: it is only right because the tree did not change.
#
# Where it sits (BENCH_RECORDED_BELOW):
# - unset: on `Kernel#require`, above RubyGems, as Bootsnap does. RubyGems then only ever sees
#   absolute paths, so it never activates the default gem a feature belongs to (`require "set"`
#   leaves `Gem.loaded_specs["set"]` unset), and a known feature skips RubyGems' `require`
#   altogether;
# - "rubygems": on `Kernel#gem_original_require`, below RubyGems, where loadscan sits. RubyGems'
#   `require` runs for every feature exactly as in a stock boot (default-gem activation
#   included): the floor of a cache that changes nothing but the search. Under Bundler with
#   RubyGems < 3.5, `bundler/setup` has already rebound `Kernel#require` to Ruby's C require
#   (RubyGems' activation is off), so nothing calls `gem_original_require` any more: the search
#   is `Kernel#require` itself, and the prelude sits there (the same place as the default then).
BENCH_RECORDED_MAP = Marshal.load(File.binread(ENV.fetch("BENCH_RECORDED_MAP")))
BENCH_RECORDED_DONE = {}
module BenchRecorded
  BODY = <<~'RUBY'
    def %<name>s(feature)
      return false if BENCH_RECORDED_DONE[feature]

      path = BENCH_RECORDED_MAP[feature]
      if path
        r = bench_recorded_original_%<name>s(path)
        BENCH_RECORDED_DONE[feature] = true
        return r
      end

      bench_recorded_original_%<name>s(feature)
    end
  RUBY

  def self.decorate(owner, name)
    owner.alias_method(:"bench_recorded_original_#{name}", name)
    owner.class_eval(format(BODY, name: name), __FILE__, __LINE__)
    owner.send(:private, name, :"bench_recorded_original_#{name}") if owner == Kernel
  end
end

# Kernel#require is Ruby's C method (no source location) without RubyGems, or after Bundler
# reversed RubyGems' mixin.
if ENV["BENCH_RECORDED_BELOW"] == "rubygems" && Kernel.private_method_defined?(:gem_original_require) &&
   Kernel.instance_method(:require).source_location
  BenchRecorded.decorate(Kernel, :gem_original_require)
else
  BenchRecorded.decorate(Kernel, :require)
end
BenchRecorded.decorate(Kernel.singleton_class, :require)
