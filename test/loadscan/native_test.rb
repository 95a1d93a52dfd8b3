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
      # (find: a file on every Ruby; Set is built into 4.0)
      code = "require #{"#{tmp}/lib/loadscan/setup".inspect}; report([Loadscan.active?, require('find')])"
      run = run_ruby(code)
      assert run.success?, run.stderr
      assert_equal [false, true], run.report
      assert_equal 1, run.stderr.scan(/loadscan: native extension could not be loaded/).size, run.stderr
      # A precompiled gem on a Ruby it holds no build for: the way out is named.
      assert_match(/no build for Ruby #{Regexp.escape(RUBY_VERSION)} .*`gem install loadscan --platform ruby`/, run.stderr)
    end
  end

  # A build of another loadscan (a checkout pulled without `rake compile`): here a real library
  # named loadscan.so whose Init_loadscan defines nothing. It is not used: one warning that says
  # to rebuild, Ruby's own require, the same features as stock.
  def test_a_build_of_another_loadscan_degrades_to_rubys_require_with_one_warning
    Dir.mktmpdir do |tmp|
      FileUtils.cp_r(Loadscan::TestSupport::LIB, tmp)
      built = Dir.glob("#{tmp}/lib/loadscan/*/loadscan.#{RbConfig::CONFIG["DLEXT"]}")
      refute_empty built
      built.each { |f| FileUtils.cp(Fixtures::CExt.build(Loadscan::TestSupport::NativeExt::CACHE, ["loadscan"]), f) }
      code = "require #{"#{tmp}/lib/loadscan/setup".inspect}; report([Loadscan.active?, require('set'), $LOADED_FEATURES.grep(%r{/set\.rb\z})])"
      run = run_ruby(code)
      assert run.success?, run.stderr
      stock = run_ruby("report([false, require('set'), $LOADED_FEATURES.grep(%r{/set\.rb\z})])")
      assert_equal stock.report, run.report
      assert_equal 1, run.stderr.lines.size, run.stderr
      assert_match(/\Aloadscan: native extension could not be loaded \(.*loadscan\.so is a build of another version of loadscan \(it lacks Native\.start, Native\.stop, Native\.save, …\): rebuild it/, run.stderr)
    end
  end

  # What lib/ names as the library's interface is exactly what the extension defines: a function
  # or constant added to one and not the other fails here, not in a stale checkout.
  def test_the_interface_lib_checks_is_what_the_extension_defines
    code = "require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}; n = Loadscan::Native; " \
           "report([n::FUNCTIONS.sort, n.singleton_methods(false).sort - %i[available? load_error not_built], " \
           "n::CONSTANTS.sort, n.constants(false).sort - %i[FUNCTIONS CONSTANTS]])"
    functions, defined, constants, defined_constants = run_ruby(code).report
    assert_equal defined, functions
    assert_equal defined_constants, constants
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
