# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../lib/loadscan/last_boot"
require "json"

# Loadscan::LastBoot: the one place a boot's figures are put in words. A real boot with
# LOADSCAN_STATS=1 prints its line at exit and records the same figures beside the cache; the
# command line's `stats` renders that record. Both go through LastBoot.describe, so they agree.
class LastBootTest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")

  def test_the_stats_line_at_exit_and_loadscan_stats_say_the_same_of_one_boot
    with_files([["lib/here.rb", ""], ["lib/sub/there.rb", ""]]) do |dir|
      cache = File.join(dir, "cache")
      code = "$LOAD_PATH.unshift(#{File.join(dir, "lib").inspect}); require 'here'; require 'sub/there'; " \
             "begin; require 'nowhere'; rescue LoadError; end; report(Loadscan.stats.slice(:hits, :deferred))"
      run = run_ruby(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache, "LOADSCAN_STATS" => "1" })
      assert run.success?, run.stderr
      line = run.stderr.lines.grep(/\Aloadscan: /).fetch(0).chomp
      assert_equal 1, run.stderr.lines.grep(/\Aloadscan: /).size, run.stderr
      figures, gc = line.delete_prefix("loadscan: ").split("; GC in the boot: ")
      assert_match(/\A#{run.report[:hits]} requires answered from the index, 0 misses, #{run.report[:deferred]} left to Ruby /, figures)
      assert_match(/; engaged: yes; \d+ entries \(0 from the cache, \d+ listed, \d+ dirs listed on demand\); setup \d+\.\d ms; cache written\z/,
                   figures)
      refute_nil gc, line

      stats = run_ruby(command: [RbConfig.ruby, EXE, "stats"], env: { "LOADSCAN_CACHE_DIR" => cache }, chdir: dir)
      assert stats.success?, stats.stderr
      recorded, recorded_gc, recorded_cc = stats.stdout.lines.map(&:chomp)
      gc, cc = gc.split("; compile cache: ")
      assert_equal figures, recorded.sub(/\A\S+ \S+ \(pid \d+, Ruby [\d.]+\): /, ""), "one renderer, one boot"
      assert_equal "GC in the boot: #{gc}", recorded_gc
      assert_equal "compile cache: #{cc}", recorded_cc
      assert_match(/\A0 files served \(0 KB\), \d+ compiled by Ruby, 0 bypassed; 0 entries read, \d+ KB written\z/, cc)
    end
  end

  # A record is the user's file: values of the wrong type (an older loadscan, a hand edit) are
  # rendered as zero, never an exception.
  def test_a_record_with_odd_values_is_still_one_line
    run = run_ruby(<<~RUBY, loadscan: nil)
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}
      report(Loadscan::LastBoot.describe({ "hits" => "many", "left_to_ruby" => [1], "deferred" => 2,
                                           "load_path_entries" => nil, "cache_load_ms" => 1.24 }, who: false))
    RUBY
    assert run.success?, run.stderr
    assert_equal "0 requires answered from the index, 0 misses, 2 left to Ruby; engaged: no; 0 entries (0 from the cache, " \
                 "0 listed, 0 dirs listed on demand); setup 1.2 ms; cache ", run.report
  end

  # The record is written as JSON by the extension and its GC mark read back at setup without
  # JSON (LastBoot.gc_end, a few patterns): what the patterns read is what JSON reads, for a
  # program that said it booted and for one that did not.
  def test_gc_end_reads_what_the_extension_wrote
    %w[booted exit].each do |how|
      with_files([]) do |dir|
        cache = File.join(dir, "cache")
        code = "#{"Loadscan.booted!; " if how == "booted"}$keep = Array.new(1000) { Object.new }; report(Loadscan::BootGC.key)"
        run = run_ruby(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
        assert run.success?, run.stderr
        text = File.read(File.join(cache, "last_boot.json"))
        gc = JSON.parse(text)["gc"]
        assert_equal run.report, gc["boot_key"]
        expected = gc["boot_end_by"] && [gc["boot_end_by"], gc["boot_end_objects"]]
        assert_equal how, expected&.first, text if how == "booted"
        assert_equal expected, Loadscan::LastBoot.gc_end(text, run.report), text
        assert_nil Loadscan::LastBoot.gc_end(text, "0#{run.report}"), "another program's record"
      end
    end
  end
end
