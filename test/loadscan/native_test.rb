# frozen_string_literal: true

require_relative "../test_helper"

# The binding under GC.stress: every allocation runs the GC, so a Ruby object the extension
# forgot to keep alive (the $LOAD_PATH snapshot, strings it returns) would crash or corrupt.
class NativeTest < Minitest::Test
  def test_requires_and_load_path_changes_under_gc_stress
    with_files((1..8).map { |i| ["e#{i % 3}/f#{i}.rb", "$n = ($n || 0) + 1"] }) do |dir|
      # Without RubyGems (whose Ruby code makes every require allocate heavily) the stressed
      # section stays short; the decorator then sits on Kernel#require itself.
      stock, = assert_same_as_stock(<<~RUBY, ruby_opts: ["--disable-gems"], timeout: 180)
        $LOAD_PATH.unshift(#{"#{dir}/e0".inspect})
        results = (1..8).map do |i|
          $LOAD_PATH.insert(1, #{dir.inspect} + "/e\#{i / 2}") if i.even? && i <= 4
          GC.stress = true
          begin
            require("f\#{i}")
          rescue LoadError => e
            [e.message, e.path]
          ensure
            GC.stress = false
          end
        end
        report("results" => results, "n" => $n, "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      assert_operator stock.report["n"], :>=, 4
    end
  end

  def test_a_missing_extension_degrades_to_rubys_require_with_one_warning
    Dir.mktmpdir do |tmp|
      FileUtils.cp_r(Loadscan::TestSupport::LIB, tmp)
      Dir.glob("#{tmp}/lib/loadscan/**/*.so").each { |f| File.delete(f) }
      code = "require #{"#{tmp}/lib/loadscan/setup".inspect}; report([Loadscan.active?, require('set')])"
      run = run_ruby(code)
      assert run.success?, run.stderr
      assert_equal [false, true], run.report
      assert_equal 1, run.stderr.scan(/loadscan: native extension could not be loaded/).size, run.stderr
      # A precompiled gem on a Ruby it holds no build for: the way out is named.
      assert_match(/no build for Ruby #{Regexp.escape(RUBY_VERSION)} .*`gem install loadscan --platform ruby`/, run.stderr)
    end
  end

  # The build installs loadscan.<DLEXT> (`rake compile`, extconf.rb): `.bundle` on macOS. Here
  # (Linux) a Ruby that says its DLEXT is `bundle` looks for that name, not for the `.so` beside.
  def test_the_extension_is_looked_up_by_this_rubys_dlext
    minor = RUBY_VERSION[/\A\d+\.\d+/]
    code = "require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}; " \
           "report([Loadscan::Native.available?, Loadscan::Native.load_error&.message])"
    assert_equal [true, nil], run_ruby(code).report
    bundle = run_ruby("RbConfig::CONFIG['DLEXT'] = 'bundle'\n#{code}").report
    assert_equal false, bundle[0]
    assert bundle[1].start_with?("no #{File.join(Loadscan::TestSupport::LIB, "loadscan", minor, "loadscan.bundle")}: no build for Ruby"),
           bundle[1]
  end

  def test_disable_leaves_require_alone
    run = run_ruby(<<~RUBY, env: { "LOADSCAN_DISABLE" => "1" })
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}
      begin; require Loadscan::Native::PROBE; rescue LoadError; end
      report([Loadscan.active?, Loadscan::Native.probes])
    RUBY
    assert run.success?, run.stderr
    assert_equal [false, 0], run.report # the probe never reached loadscan
  end

  def test_start_names_unknown_options
    code = "require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}; " \
           "begin; Loadscan::Native.start([], dlext: 'so', bogus: 1, 'other' => 2); rescue ArgumentError => e; print e.message; end"
    assert_equal 'unknown keywords: :bogus, "other"', run_ruby!(code).stdout
  end
end
