# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/iseqs"

# loadscan's compile cache (README, "Compile cache"), in real processes against stock Ruby: what a
# warm boot is served is the instruction sequence Ruby compiles now, and every case where a
# cached one would differ from stock's (warnings, coverage, compile options, contents that
# changed) gets Ruby's own compile.
class CompileCacheTest < Minitest::Test
  # Ruby's own library, a sample a boot loads.
  STDLIB = %w[set json fileutils optparse erb uri net/http ostruct tempfile securerandom digest time pp
              open3 shellwords forwardable delegate singleton monitor].freeze

  # Reports `{path => iseq.to_a}` for each Ruby file Ruby compiled itself (a TracePoint from the
  # first line: stock) or, with loadscan, for each loaded file the compile cache holds now (the
  # entry `load_iseq` serves: the same bytes a warm require got).
  STOCK_ISEQS = <<~RUBY
    #{Loadscan::TestSupport::Iseqs::PLAIN}
    $compiled = {}
    TracePoint.new(:script_compiled) { |tp| i = tp.instruction_sequence; $compiled[i.path] = [i.disasm, LoadscanIseqs.plain(i.to_a)] if tp.eval_script.nil? }.enable
    at_exit { File.binwrite(ENV.fetch("ISEQS"), Marshal.dump($compiled)) }
  RUBY
  SERVED_ISEQS = <<~RUBY
    #{Loadscan::TestSupport::Iseqs::PLAIN}
    compile_cache = Loadscan.stats[:compile_cache].dup
    served = {}
    $LOADED_FEATURES.grep(/\\.rb\\z/).each { |f| i = RubyVM::InstructionSequence.load_iseq(f); served[f] = [i.disasm, LoadscanIseqs.plain(i.to_a)] if i }
    File.binwrite(ENV.fetch("ISEQS"), Marshal.dump(served))
    File.binwrite(ENV.fetch("ISEQS") + ".stats", Marshal.dump(compile_cache))
  RUBY

  def test_warm_iseqs_of_rubys_library_are_fresh_compiles
    parsers = RUBY_VERSION >= "3.4" ? [[], ["--parser=parse.y"]] : [[]]
    parsers.each do |opts|
      Dir.mktmpdir("loadscan-cc") do |tmp|
        code = STDLIB.map { |f| "require #{f.inspect}" }.join("\n") + "\nreport($LOADED_FEATURES.dup)\n"
        cold = run_ruby!(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => "#{tmp}/cache" }, ruby_opts: opts)
        assert_operator cold.stats[:compile_cache][:misses], :>=, 20, cold.stats.inspect
        warm, stock = served_and_stock(code, tmp, opts)
        own = ->(features) { features.reject { |f| f.start_with?(tmp) } }
        assert_same_loaded_features own.call(stock.report), own.call(warm.report)
        figures = Marshal.load(File.binread("#{tmp}/served.bin.stats")) # rubocop:disable Security/MarshalLoad
        assert_operator figures[:hits], :>=, 20, figures.inspect
        assert_equal 0, figures[:misses], figures.inspect
        assert_iseqs_equal(tmp, opts, min: 20)
      end
    end
  end

  # A warm boot with the cache, and a stock one recording what Ruby compiles; the iseqs each
  # saw are in tmp/served.bin and tmp/stock.bin.
  def served_and_stock(code, tmp, opts, env: {})
    File.write("#{tmp}/stock.rb", STOCK_ISEQS)
    warm = run_ruby!("#{code}\n#{SERVED_ISEQS}", loadscan: true, ruby_opts: opts,
                           env: env.merge("LOADSCAN_CACHE_DIR" => "#{tmp}/cache", "ISEQS" => "#{tmp}/served.bin"))
    stock = run_ruby!(code, loadscan: false, ruby_opts: opts + ["-r#{tmp}/stock.rb"], env: env.merge("ISEQS" => "#{tmp}/stock.bin"))
    run_ruby!(code, loadscan: false, ruby_opts: opts + ["-r#{tmp}/stock.rb"], env: env.merge("ISEQS" => "#{tmp}/again.bin"))
    [warm, stock]
  end

  def assert_iseqs_equal(tmp, opts, min:)
    served = Marshal.load(File.binread("#{tmp}/served.bin")) # rubocop:disable Security/MarshalLoad
    stock = Marshal.load(File.binread("#{tmp}/stock.bin")) # rubocop:disable Security/MarshalLoad
    assert_operator served.size, :>=, min, "#{opts}: #{served.size} files served"
    again = Marshal.load(File.binread("#{tmp}/again.bin")) # rubocop:disable Security/MarshalLoad
    differ = Loadscan::TestSupport::Iseqs.differ(served, stock, again)
    assert_empty differ, "#{opts}: served iseqs differ from Ruby's compile"
  end

  WARNS = [["lib/verbose.rb", "def unused\n  x = 1\nend\n$verbose = :loaded\n"],
           ["lib/default.rb", "H = { a: 1, a: 2 }\n$default = H[:a]\n"],
           ["lib/quiet.rb", "$quiet = 1 + 1\n"]].freeze

  # Parse warnings are Ruby's: a file whose compile warns in the current warning state is
  # compiled by Ruby (cold and warm), so `ruby -w` and a default run print what stock prints.
  def test_parse_warnings_are_stocks_cold_and_warm_with_and_without_w
    with_files(WARNS) do |dir|
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "verbose"; require "default"; require "quiet"; report([$verbose, $default, $quiet]))
      cache = "#{dir}/cache"
      [[], ["-w"], [], ["-w"], ["-W:no-deprecated"]].each_with_index do |opts, i|
        stock = run_ruby!(code, loadscan: false, ruby_opts: opts)
        fast = run_ruby!(code, loadscan: true, ruby_opts: opts, env: { "LOADSCAN_CACHE_DIR" => cache })
        assert_equal stock.report, fast.report
        assert_equal stock.stderr_normalized, fast.stderr_normalized, "run #{i} #{opts}"
        assert_match(/duplicated/, stock.stderr, "the default-level warning is there to lose")
        assert_match(/unused variable/, stock.stderr, "the verbose warning") if opts == ["-w"]
      end
      # The quiet file (and the verbose one without -w) is served.
      warm = run_ruby!(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
      assert_equal 2, warm.stats[:compile_cache][:hits], warm.stats.inspect
    end
  end

  # Coverage running: nothing is served (a cached iseq counts no lines).
  def test_coverage_gets_rubys_compile
    with_files([["lib/a.rb", "def f(x)\n  x + 1\nend\nf(1)\n"]]) do |dir|
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "coverage"; Coverage.start; require "a"; report(Coverage.result.select { |k, _| k.start_with?(#{dir.inspect}) }))
      warm_up(dir, %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"))
      stock, fast = assert_same_as_stock(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" })
      assert_equal [1, 1, nil, 1], stock.report["#{dir}/lib/a.rb"]
      assert_operator fast.stats[:compile_cache][:bypasses], :>=, 1
    end
  end

  # compile_option changed before a require: a compile made with other options is not served.
  def test_compile_option_changed_before_a_require
    with_files([["lib/a.rb", "S = \"str\"\n"]]) do |dir|
      warm_up(dir, %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"))
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); RubyVM::InstructionSequence.compile_option = { frozen_string_literal: true }; require "a"; report(S.frozen?))
      stock, = assert_same_as_stock(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" })
      assert_equal true, stock.report
    end
  end

  # The same size and mtime, other contents: another compile.
  def test_edit_within_the_same_second_and_size
    with_files([["lib/a.rb", "$v = 1\n"]]) do |dir|
      path = "#{dir}/lib/a.rb"
      warm_up(dir, %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"))
      mtime = File.mtime(path)
      File.write(path, "$v = 2\n")
      File.utime(mtime, mtime, path)
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"; report($v))
      _, fast = assert_same_as_stock(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" })
      assert_equal 2, fast.report
      assert_equal 0, fast.stats[:compile_cache][:hits]
    end
  end

  # A fresh checkout (a CI cache restored): new mtimes, same contents, served with no setting.
  def test_fresh_checkout_with_new_mtimes_is_served
    files = (1..5).map { |i| ["lib/f#{i}.rb", "$f#{i} = #{i}\n"] }
    with_files(files) do |dir|
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); 5.times { |i| require "f\#{i + 1}" }; report($f5))
      warm_up(dir, code)
      later = Time.now + 3600
      Dir["#{dir}/lib/*.rb"].each { |f| File.write(f, File.read(f)) || File.utime(later, later, f) }
      _, fast = assert_same_as_stock(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" })
      assert_equal 5, fast.stats[:compile_cache][:hits], fast.stats.inspect
    end
  end

  # The file changes during the boot, after it was loaded: the next boot gets the new contents.
  def test_file_changed_during_the_boot
    with_files([["lib/a.rb", "$v = 1\n"]]) do |dir|
      path = "#{dir}/lib/a.rb"
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"; v = $v; File.write(#{path.inspect}, "$v = \#{v + 1}\\n"); load #{path.inspect}; report([v, $v]))
      cache = { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" }
      File.write(path, "$v = 1\n")
      stock = run_ruby!(code, loadscan: false)
      3.times do |i|
        File.write(path, "$v = 1\n")
        fast = run_ruby!(code, loadscan: true, env: cache)
        assert_equal stock.report, fast.report, "boot #{i}"
        assert_equal [1, 2], fast.report
        assert_equal 1, fast.stats[:compile_cache][:hits], fast.stats.inspect if i.positive?
      end
    end
  end

  # A damaged store, five ways: one warning, Ruby compiles, the boot is stock's; the next boot
  # is served again from the file written in its place.
  def test_damaged_store_five_ways
    files = (1..3).map { |i| ["lib/f#{i}.rb", "$f#{i} = #{i} # #{"x" * 200}\n"] }
    with_files(files) do |dir|
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); 3.times { |i| require "f\#{i + 1}" }; report([$f1, $f2, $f3]))
      cache = { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" }
      store = "#{dir}/cache/iseq.bin"
      damage = {
        "truncated" => ->(b) { b[0, b.size / 2] },
        "bad header" => ->(b) { "XXXXXXXX" + b[8..] },
        "table changed" => ->(b) { b.dup.tap { |c| c.setbyte(80, c.getbyte(80) ^ 1) } },
        "blob changed" => ->(b) { b.dup.tap { |c| at = c.b.rindex("lib/f2.rb"); c.setbyte(at, c.getbyte(at) ^ 1) } },
        "garbage" => ->(b) { Random.new(1).bytes(b.size) },
      }
      damage.each do |label, how|
        FileUtils.rm_rf(cache["LOADSCAN_CACHE_DIR"])
        warm_up(dir, code)
        File.binwrite(store, how.call(File.binread(store)))
        stock, fast = run_both(code.sub("report([$f1, $f2, $f3])", "report([[$f1, $f2, $f3], $LOADED_FEATURES.dup])"), loadscan_env: cache)
        assert fast.success?, "#{label}: #{fast.stderr}"
        assert_equal [[1, 2, 3], [1, 2, 3]], [stock.report[0], fast.report[0]], label
        assert_same_loaded_features stock.report[1], fast.report[1], label
        assert_equal 1, fast.stderr.scan(/loadscan: .*(damaged|compile cache)/).size, "#{label}: #{fast.stderr}"
        assert_operator fast.stats[:compile_cache][:misses], :>=, 1, label
        # A file that does not start as loadscan's is never replaced (as the index's): it warns
        # at each boot; one of loadscan's is written again in its place.
        next if ["bad header", "garbage"].include?(label)

        again = run_ruby!(code, loadscan: true, env: cache)
        assert_empty again.stderr, label
        assert_equal 3, again.stats[:compile_cache][:hits], "#{label}: #{again.stderr}"
      end
    end
  end

  # LOADSCAN_COMPILE_CACHE=0: nothing served, no file.
  def test_turned_off
    with_files([["lib/a.rb", "$v = 1\n"]]) do |dir|
      code = %($LOAD_PATH.unshift(#{"#{dir}/lib".inspect}); require "a"; report(Loadscan.stats[:compile_cache]))
      2.times { run_ruby!(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache", "LOADSCAN_COMPILE_CACHE" => "0" }) }
      refute File.exist?("#{dir}/cache/iseq.bin")
    end
  end

  private

  # Boots `code` twice with loadscan on dir/cache (the second decides on compiles of the first
  # whose state was new), so the cache holds its files.
  def warm_up(dir, code)
    run_ruby!(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => "#{dir}/cache" })
  end
end
