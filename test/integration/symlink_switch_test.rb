# frozen_string_literal: true

require_relative "../test_helper"

# A deploy's `current` symlink switched while the process runs (issue 20): requires follow the
# release stock Ruby follows, and cost what they cost stock.
class SymlinkSwitchTest < Minitest::Test
  def test_deploy_symlink_switched_mid_process
    with_files([["releases/A/lib/app.rb", "$release = :A"], ["releases/B/lib/app.rb", "$release = :B"],
                ["releases/A/lib/boot.rb", ""]]) do |dir|
      # Both runs share the tree: each starts from current -> releases/A.
      code = <<~RUBY
        File.unlink(#{"#{dir}/current".inspect}) if File.symlink?(#{"#{dir}/current".inspect})
        File.symlink("releases/A", #{"#{dir}/current".inspect})
        $LOAD_PATH.unshift(#{"#{dir}/current/lib".inspect})
        require "boot"
        File.symlink("releases/B", #{"#{dir}/next".inspect})
        File.rename(#{"#{dir}/next".inspect}, #{"#{dir}/current".inspect})
        $LOAD_PATH << #{"#{dir}/other".inspect}
        r = require "app"
        report("r" => r, "release" => $release, "path" => $LOAD_PATH.resolve_feature_path("app"),
               "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      _, fast = assert_same_as_stock(code)
      assert_equal :B, fast.report["release"]
    end
  end

  # Issue 20, item 5. While `$LOAD_PATH` is unchanged, Ruby expands again only what is not an
  # absolute String: with a Pathname or a relative entry present, an absolute entry through a
  # switched `current` symlink keeps its release until `$LOAD_PATH` changes (or, for a relative
  # entry, until the current directory does).
  def test_deploy_symlink_switched_with_a_pathname_or_relative_entry
    with_files([["releases/A/lib/one.rb", "$one = :A"], ["releases/B/lib/one.rb", "$one = :B"],
                ["releases/A/lib/two.rb", "$two = :A"], ["releases/B/lib/two.rb", "$two = :B"],
                ["releases/A/lib/three.rb", "$three = :A"], ["releases/B/lib/three.rb", "$three = :B"],
                ["releases/A/lib/boot.rb", ""], ["p/.keep", ""]]) do |dir|
      current = "#{dir}/current"
      {
        "pathname" => [%(Pathname(#{"#{dir}/p".inspect}), #{"#{current}/lib".inspect}), "/"],
        "relative" => [%("p", #{"#{current}/lib".inspect}), "/"],
        "relative through the link" => [%("p", "current/lib"), dir],
      }.each do |label, (entries, away)|
        code = <<~RUBY
          require "pathname"
          File.unlink(#{current.inspect}) if File.symlink?(#{current.inspect})
          File.symlink("releases/A", #{current.inspect})
          Dir.chdir(#{dir.inspect})
          $LOAD_PATH.unshift(#{entries})
          require "boot"
          File.symlink("releases/B", #{"#{dir}/next".inspect})
          File.rename(#{"#{dir}/next".inspect}, #{current.inspect})
          one = [require("one"), $one, $LOAD_PATH.resolve_feature_path("one")]
          Dir.chdir(#{away.inspect}) { require "two" }
          three = [require("three"), $three, $LOAD_PATH.resolve_feature_path("three")]
          report("one" => one, "two" => $two, "three" => three, "loaded_features" => $LOADED_FEATURES.dup)
        RUBY
        stock, = assert_same_as_stock(code)
        assert_equal :A, stock.report["one"][1], label
      end
    end
  end

  # Issue 20, item 2. An entry reached through a relative (`../`) symlink, with a Pathname
  # entry that makes every require check the load path: re-requires and load-path changes cost
  # what they cost stock Ruby (they grew without bound: 1,000 re-requires took 4.5 s, the next
  # 1,000 11 s).
  def test_relative_symlink_with_a_pathname_entry_stays_as_fast_as_stock
    with_files([["shared/lib/x.rb", ""], ["app/vendor", :symlink, "../shared"], ["p/.keep", ""]]) do |dir|
      code = <<~RUBY
        require "pathname"
        $LOAD_PATH.unshift(#{"#{dir}/app/vendor/lib".inspect}, Pathname(#{"#{dir}/p".inspect}))
        require "x"
        clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
        t = clock.call
        1000.times { require "x" }
        first = clock.call - t
        t = clock.call
        1000.times { require "x" }
        second = clock.call - t
        t = clock.call
        200.times { |i| $LOAD_PATH << #{"#{dir}/app/vendor/g".inspect} + i.to_s; require "x" }
        growing = clock.call - t
        report("times" => [first, second, growing], "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, fast = assert_same_as_stock(code, only: [])
      stock.report["times"].zip(fast.report["times"], %w[first second growing]).each do |s, f, what|
        assert_operator f, :<, (5 * s) + 0.5, "#{what}: #{f.round(3)} s against stock's #{s.round(3)} s"
      end
    end
  end
end
