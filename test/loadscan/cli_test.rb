# frozen_string_literal: true

require_relative "../test_helper"

class CLITest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  def loadscan(*args, cache:, env: {})
    Open3.capture3({ "LOADSCAN_CACHE_DIR" => cache, "RUBYOPT" => nil }.merge(env), RbConfig.ruby, EXE, *args)
  end

  def test_lookup_agrees_with_ruby_and_stats_and_clear_work
    with_files([["lib/a.rb", ""], ["lib/b/c.so", ""], ["lib/loop", :symlink, "."], ["lib/gone", :symlink, "nowhere"]]) do |dir|
      cache = File.join(dir, "cache")
      features = %w[a b/c nope loop/a]
      ruby = features.map do |f|
        found = (Dir.chdir(dir) { ruby_resolve("lib", f) })
        "#{f}\t#{found || "missing"}"
      end
      out, err, status = loadscan("-I", "#{dir}/lib", "lookup", *features, cache: cache)
      assert status.success?, err
      assert_equal ["a\t#{dir}/lib/a.rb", "b/c\t#{dir}/lib/b/c.so", "nope\tmissing", "loop/a\t#{dir}/lib/loop/a.rb"], ruby
      assert_equal ruby, out.lines.map(&:chomp), "lazy listing follows the symlink loop as far as the feature names"
      out, = loadscan("-I", "#{dir}/lib", "lookup", *features, cache: cache, env: { "LOADSCAN_LAZY" => "0" })
      assert_equal ruby[0, 3] + ["loop/a\tunknown"], out.lines.map(&:chomp), "a full scan cuts the loop"
      out, = loadscan("-I", "#{dir}/lib", "problems", cache: cache, env: { "LOADSCAN_LAZY" => "0" })
      assert_match(/^loop\t.*symlink loop/, out)
      out, = loadscan("-I", "#{dir}/lib", "stats", cache: cache)
      assert_match(/^load_path_entries: \d+$/, out)
      out, = loadscan("-I", "#{dir}/lib", "problems", cache: cache)
      assert_match(/^dangling\t.*gone/, out)
      refute File.exist?(File.join(cache, "index")), "the CLI never writes the cache"
      out, = loadscan("clear", cache: cache)
      assert_equal "removed #{cache}/index\n", out
      _, err, status = loadscan("bogus", cache: cache)
      assert_equal 2, status.exitstatus
      assert_match(/Usage/, err)
    end
  end

  # What `$LOAD_PATH.resolve_feature_path` says in a fresh Ruby with only `entry` on the path.
  def ruby_resolve(entry, feature)
    out, = Open3.capture2(RbConfig.ruby, "--disable-gems", "-I", entry, "-e",
                          "r = $LOAD_PATH.resolve_feature_path(ARGV[0]) rescue nil; print r ? r[1] : ''", feature)
    out.empty? ? nil : out
  end
end
