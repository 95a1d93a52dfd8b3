# frozen_string_literal: true

require_relative "../test_helper"

class CLITest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  def loadscan(*args, cache:)
    Open3.capture3({ "LOADSCAN_CACHE_DIR" => cache, "RUBYOPT" => nil }, RbConfig.ruby, EXE, *args)
  end

  def test_lookup_agrees_with_ruby_and_stats_and_clear_work
    with_files([["lib/a.rb", ""], ["lib/b/c.so", ""], ["lib/loop", :symlink, "."]]) do |dir|
      cache = File.join(dir, "cache")
      out, err, status = loadscan("-I", "#{dir}/lib", "lookup", "a", "b/c", "nope", "loop/a", cache: cache)
      assert status.success?, err
      assert_equal ["a\t#{dir}/lib/a.rb", "b/c\t#{dir}/lib/b/c.so", "nope\tmissing", "loop/a\tunknown"], out.lines.map(&:chomp)
      out, = loadscan("-I", "#{dir}/lib", "stats", cache: cache)
      assert_match(/^load_path_entries: \d+$/, out)
      out, = loadscan("-I", "#{dir}/lib", "problems", cache: cache)
      assert_match(/^loop\t.*symlink loop/, out)
      refute File.exist?(File.join(cache, "index")), "the CLI never writes the cache"
      out, = loadscan("clear", cache: cache)
      assert_equal "removed #{cache}/index\n", out
      _, err, status = loadscan("bogus", cache: cache)
      assert_equal 2, status.exitstatus
      assert_match(/Usage/, err)
    end
  end
end
