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
# - "rubygems": on every binding of Ruby's C require (the require-family names of `Kernel` and
#   its singleton class whose method has no source location), below RubyGems, where loadscan
#   sits. Whatever Ruby code wraps it runs for every feature exactly as in a stock boot: RubyGems'
#   `require` (default-gem activation included) and, on Ruby 3.3+, the bundled-gems warning's
#   wrapper. Which binding that is depends on the stack: without Bundler, `gem_original_require`
#   under RubyGems' `Kernel#require`; under Bundler with RubyGems < 3.5 (Ruby 3.1), `bundler/setup`
#   has rebound `Kernel#require` itself to the C require (the same place as the default then);
#   under Bundler on Ruby 3.4, the bundled-gems wrapper's `no_warning_require` (Bundler rebound
#   `require` to the C require, which the wrapper then kept under that name).
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

C_REQUIRE_NAMES = %i[require gem_original_require no_warning_require].freeze
[Kernel, Kernel.singleton_class].each do |owner|
  names = if ENV["BENCH_RECORDED_BELOW"] == "rubygems"
            C_REQUIRE_NAMES.select do |n|
              (owner.private_method_defined?(n) || owner.method_defined?(n)) && owner.instance_method(n).source_location.nil?
            end
          else
            %i[require]
          end
  names.each { |n| BenchRecorded.decorate(owner, n) }
end
