# frozen_string_literal: true

require_relative "../test_helper"

# Odd trees and odd load paths: loadscan must boot, answer exactly like stock Ruby, and say
# what it worked around at most once.
class EdgeCasesTest < Minitest::Test
  # require_script with each feature's resolve_feature_path answer too.
  def script(load_path, features, setup = "") = require_script(load_path, features, setup: setup, resolve: true)

  # Same results and $LOADED_FEATURES as stock, with loadscan active; `quiet: false` where
  # loadscan may warn (the test checks the warning).
  def assert_same(code, quiet: true, **opts)
    stock, fast = assert_same_as_stock(code, quiet: quiet, **opts)
    refute_nil fast.report["stats"], "loadscan was not active"
    [stock, fast]
  end

  def test_symlink_loop_boots_and_warns_once
    with_files([["e/a/x.rb", ""], ["e/a/loop", :symlink, ".."], ["e/b/y.rb", ""], ["f/a/loop/z.rb", ""]]) do |dir|
      code = script(%W[#{dir}/e #{dir}/f], %w[a/x a/loop/a/x a/loop/loop/b/y a/loop/z b/y])
      # Listed lazily, the loop is followed exactly as far as each feature names it: no
      # warning, and the index answers what Ruby would open through the link.
      _, fast = assert_same(code)
      assert_empty fast.stderr
      assert_operator fast.report["stats"][:hits], :>=, 4, fast.report["stats"].inspect
      # A full scan up front cuts the loop with one warning and leaves it to Ruby.
      _, fast = assert_same(code, quiet: false, env: { "LOADSCAN_LAZY" => "0" })
      assert_equal 1, fast.stderr.scan(/loadscan: .*symlink loop/).size, fast.stderr
    end
  end

  # LOADSCAN_IGNORE_DIRS: names (any depth) and absolute paths (a root, or a directory in one)
  # are never listed and left to Ruby, quietly; the default is node_modules, empty is none.
  def test_ignored_dirs_are_left_to_ruby
    with_files([["e/node_modules/x.rb", ""], ["e/vendor/y.rb", ""], ["e/keep/vendor/v.rb", ""], ["e/keep/z.rb", ""],
                ["e/deep/skip/s.rb", ""], ["f/w.rb", ""]]) do |dir|
      code = script(%W[#{dir}/e #{dir}/f], %w[node_modules/x vendor/y keep/vendor/v keep/z deep/skip/s w])
      {
        nil => %w[node_modules/x],
        "vendor:#{dir}/f:#{dir}/e/deep/skip" => %w[vendor/y keep/vendor/v deep/skip/s w],
        "" => [],
      }.each do |setting, ignored|
        env = setting.nil? ? {} : { "LOADSCAN_IGNORE_DIRS" => setting }
        [{}, { "LOADSCAN_LAZY" => "0" }].each do |mode|
          _, fast = assert_same(code, env: env.merge(mode))
          stats = fast.report["stats"]
          assert_equal ignored.size, stats[:left_to_ruby][:blind_spot], "#{setting.inspect} #{mode}: #{stats.inspect}"
          assert_equal 6 - ignored.size, stats[:hits], "#{setting.inspect} #{mode}: #{stats.inspect}"
        end
      end
    end
  end

  def test_dangling_symlink_is_ignored_quietly
    with_files([["e/gone.rb", :symlink, "nowhere.rb"], ["e/gonedir", :symlink, "nowhere"], ["f/gone.rb", ""]]) do |dir|
      _, fast = assert_same(script(%W[#{dir}/e #{dir}/f], %w[gone gonedir/x]))
      assert_empty fast.stderr
    end
  end

  def test_unreadable_dir_is_left_to_ruby
    with_files([["e/locked/x.rb", "$x = :e"], ["e/open.rb", ""], ["f/locked/x.rb", "$x = :f"], ["f/locked/y.rb", ""]]) do |dir|
      FileUtils.chmod_R("a+rX", dir)
      searchable_parent(dir)
      File.chmod(0o111, "#{dir}/e/locked") # searchable, not listable: Ruby still opens e/locked/x.rb
      _, fast = assert_same(script(%W[#{dir}/e #{dir}/f], %w[locked/x locked/y open]), quiet: false, as_nobody: true)
      assert_match(/loadscan: .*locked.*unreadable/, fast.stderr)
    end
  end

  def test_dir_removed_between_scan_and_require
    with_files([["e/gone/x.rb", "$x = :e"], ["e/gone/only.rb", ""], ["f/gone/x.rb", "$x = :f"]]) do |dir|
      assert_same(script(%W[#{dir}/e #{dir}/f], %w[gone/x gone/only],
                         "require 'fileutils'\nLoadscan.lookup('gone/x') if defined?(Loadscan); FileUtils.rm_rf(#{"#{dir}/e/gone".inspect})"))
    end
  end

  def test_relative_missing_file_pathname_and_duplicate_entries
    with_files([["cwd/rel/r.rb", ""], ["e/p.rb", ""], ["e/d.rb", ""], ["plain.rb", ""], ["cwd/other/r.rb", ""]]) do |dir|
      lp = <<~RUBY
        require "pathname"
        $LOAD_PATH.unshift("rel", #{"#{dir}/missing".inspect}, #{"#{dir}/plain.rb".inspect}, Pathname(#{"#{dir}/e".inspect}),
                           #{"#{dir}/e".inspect}, #{"#{dir}/e/".inspect}, #{"#{dir}//e".inspect})
      RUBY
      assert_same(script([], %w[r p d plain nothing], lp + <<~RUBY), chdir: "#{dir}/cwd")
        r1 = require("r")
        Dir.chdir(#{"#{dir}/cwd/other".inspect})   # "rel" now means cwd/other/rel: nothing there
        $LOADED_FEATURES.reject! { |f| f.end_with?("/r.rb") }
      RUBY
    end
  end

  def test_odd_file_names
    names = ["café", "日本語", "with space", "dash-ed", "semi;colon", "quote'd", "new\nline", "x.y.z", "tab\tbed"]
    with_files(names.map { |n| ["e/#{n}.rb", ""] } + [["e/.rb", ""], ["e/dir/.rb", ""]]) do |dir|
      assert_same(script(%W[#{dir}/e], names + ["dir/", "x.y", "x.y.z.rb"]))
    end
  end

  def test_fifo_and_directory_named_like_a_ruby_file
    with_files([["e/pipe.rb", :fifo], ["e/dir.rb/x.rb", ""], ["f/dir.rb", ""], ["f/pipe.rb", ""]]) do |dir|
      stock, = assert_same(script(%W[#{dir}/e #{dir}/f], %w[dir], <<~RUBY))
        $pipe = $LOAD_PATH.resolve_feature_path("pipe")
      RUBY
      assert_equal "#{dir}/f/dir.rb", stock.report["results"][0][1][1]
    end
  end

  # Issue 20, item 8. `require "foo.so"` (or `.o`) that no entry has as a native extension is
  # searched again as a bare feature: `foo.so.rb` in any entry, then `foo.so.so` (load.c's
  # `search_required` falls through); `foo.rb` has no second search.
  def test_native_extension_names_fall_back_to_a_bare_search
    with_files([["e/foo.so.rb", "$foo = :e"], ["f/foo.so.rb", "$foo = :f"], ["f/bar.o.rb", "$bar = true"],
                ["e/sub/baz.so.rb", ""], ["f/qux.rb.rb", ""]]) do |dir|
      # Not just written (a directory changed within the racy window is asked again), so that a
      # miss of `foo.so` is sure and the bare search is the index's too.
      backdate(dir)
      _, fast = assert_same(script(%W[#{dir}/e #{dir}/f], %w[foo.so bar.o sub//baz.so nope.so qux.rb foo.so]))
      # (Where extensions are linked in, a .so miss is never sure, README "Limits": Ruby searches.)
      assert_operator fast.report["stats"][:hits], :>=, 3, fast.report["stats"].inspect unless RbConfig::CONFIG["EXTSTATIC"] == "static"
    end
  end
end
