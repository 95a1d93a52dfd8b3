# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../rakelib/native_gem"

# The Rubies a precompiled gem admits (required_ruby_version, as RubyGems checks it) and its
# glibc floor, as `rake native` computes them.
class NativeGemRequirementTest < Minitest::Test
  def admits(minors, dev: [])
    requirement = Gem::Requirement.new(NativeGem.ruby_requirement(minors, dev: dev))
    %w[3.0.7 3.1.0 3.1.7 3.2.0 3.2.9 3.2.19 3.3.0 3.3.8 3.4.5 3.4.9 3.5.0 4.0.0 4.0.2 4.1.0.dev 4.1.0 4.2.0.dev].select do |v|
      requirement.satisfied_by?(Gem::Version.new(v))
    end
  end

  def test_exactly_the_minors_it_holds
    assert_equal %w[3.1.0 3.1.7 3.3.0 3.3.8 3.4.5 3.4.9], admits(%w[3.1 3.3 3.4])
    assert_equal %w[3.1.0 3.1.7], admits(%w[3.1])
    assert_equal %w[3.3.0 3.3.8 3.4.5 3.4.9], admits(%w[3.4 3.3])
    # Across 3.x and 4.x: 3.2's gap stays, 4.0 is in, 4.1 is not but its previews (3.5 had only previews, renamed 4.0: a
    # requirement cannot leave out a range, and such a Ruby gets the warning that no build is held for it).
    assert_equal %w[3.1.0 3.1.7 3.3.0 3.3.8 3.4.5 3.4.9 3.5.0 4.0.0 4.0.2 4.1.0.dev], admits(%w[3.1 3.3 3.4 4.0])
    # A gem built by a development Ruby (bin/test on 4.1-dev) admits it: 4.1.0.dev is below 4.1.
    assert_equal %w[4.1.0.dev 4.1.0 4.2.0.dev], admits(%w[4.1], dev: %w[4.1])
    assert_equal %w[4.1.0 4.2.0.dev], admits(%w[4.1])
  end

  def test_glibc_floor_of_a_built_library
    library = File.join(Loadscan::TestSupport::ROOT, "lib", "loadscan", RUBY_VERSION[/\A\d+\.\d+/], "loadscan.so")
    skip "no #{library} (rake compile)" unless File.file?(library) && RUBY_PLATFORM.include?("linux")

    floor = NativeGem.glibc_floor([library])
    assert_match(/\A2\.\d+\z/, floor)
    refute_operator Gem::Version.new(floor), :>, Gem::Version.new(NativeGem::GLIBC_FLOOR)
  end
end
