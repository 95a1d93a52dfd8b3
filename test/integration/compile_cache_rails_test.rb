# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/iseqs"
require_relative "../support/rails_app"

# The compile cache on the Rails app (test/support/rails_app.rb), development and production:
# every file a warm boot is served from the cache has the instruction sequence Ruby compiles now
# (a stock boot with Bootsnap's compile cache off, recording each compile), and the boot is
# stock's. Where the stack has Bootsnap (3.3), loadscan's cache answers in front of Bootsnap's.
class CompileCacheRailsTest < Minitest::Test
  RailsApp = Loadscan::TestSupport::RailsApp
  include RailsApp::NeedsRails

  SECRET = { "SECRET_KEY_BASE" => "x" * 64 }.freeze
  # The warm boot's report: what it loaded, the compile cache's figures, and for each loaded file
  # the instruction sequence the cache holds for it now (what `load_iseq` served).
  SERVED = <<~RUBY
    #{Loadscan::TestSupport::Iseqs::PLAIN}
    figures = defined?(Loadscan.stats) && Loadscan.stats && Loadscan.stats[:compile_cache].dup
    served = {}
    if defined?(Loadscan::CompileCache) && Loadscan::CompileCache.started?
      $LOADED_FEATURES.grep(/\\.rb\\z/).each { |f| i = RubyVM::InstructionSequence.load_iseq(f); served[f] = [i.disasm, LoadscanIseqs.plain(i.to_a)] if i }
    end
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump("loaded_features" => $LOADED_FEATURES.dup,
      "figures" => figures, "served" => served, "front" => RubyVM::InstructionSequence.singleton_class.ancestors.first.class.name))
  RUBY
  # The stock boot's: what it loaded, and each compile (a TracePoint from the first line, RUBYOPT).
  RECORD = <<~RUBY
    #{Loadscan::TestSupport::Iseqs::PLAIN}
    $compiled = {}
    TracePoint.new(:script_compiled) { |tp| i = tp.instruction_sequence; $compiled[i.path] = [i.disasm, LoadscanIseqs.plain(i.to_a)] if tp.eval_script.nil? }.enable
  RUBY
  STOCK_REPORT = <<~RUBY
    File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump("loaded_features" => $LOADED_FEATURES.dup, "compiled" => $compiled))
  RUBY

  def test_development_boot_served_from_the_cache_is_rubys_compile
    assert_served_like_stock({})
  end

  def test_production_boot_served_from_the_cache_is_rubys_compile
    assert_served_like_stock(RailsApp.production)
  end

  # One compile cache answers: loadscan's where it is engaged (Bootsnap's iseq directory stays
  # empty; its YAML cache is its own), Bootsnap's as before where loadscan is off.
  if RailsApp.bootsnap_stack? && RailsApp.rails72?
    def test_bootsnaps_iseq_cache_only_where_loadscan_is_off
      bootsnap!
      Dir.mktmpdir("loadscan-cc-bootsnap") do |tmp|
        tmp = File.realpath(tmp)
        app = rails_app!(RailsApp.app(tmp))
        iseqs = -> { Dir[File.join(app, "tmp/cache/bootsnap/compile-cache-iseq/**/*")].count { |f| File.file?(f) } }
        env = SECRET.merge("LOADSCAN_CACHE_DIR" => "#{tmp}/cache")
        runner = [RbConfig.ruby, "bin/rails", "runner", SERVED]
        2.times { RailsApp.boot(app, runner, env: env) }
        assert_equal 0, iseqs.call, "Bootsnap's iseq cache unused where loadscan's answers"
        assert_operator File.size("#{tmp}/cache/iseq.bin"), :>, 100_000
        off = RailsApp.boot(app, runner, loadscan: false, env: env.merge("LOADSCAN_DISABLE" => "1"))
        assert_nil off.report["figures"]
        assert_operator iseqs.call, :>, 100, "Bootsnap's iseq cache works where loadscan is off"
      end
    end
  end

  private

  def assert_served_like_stock(env)
    Dir.mktmpdir("loadscan-cc-rails") do |tmp|
      tmp = File.realpath(tmp)
      app = rails_app!(RailsApp.app(tmp))
      env = SECRET.merge(env)
      File.write("#{tmp}/record.rb", RECORD)
      stock, again = 2.times.map do
        RailsApp.boot(app, [RbConfig.ruby, "bin/rails", "runner", STOCK_REPORT], loadscan: false,
                      env: env.merge(RailsApp::STOCK).merge("RUBYOPT" => "-r#{tmp}/record.rb", "DISABLE_BOOTSNAP_COMPILE_CACHE" => "1"))
      end
      cached = env.merge("LOADSCAN_CACHE_DIR" => "#{tmp}/cache")
      runner = [RbConfig.ruby, "bin/rails", "runner", SERVED]
      2.times { RailsApp.boot(app, runner, env: cached) } # cold, then what the first left unsettled
      warm = RailsApp.boot(app, runner, env: cached)
      label = env.fetch("RAILS_ENV", "development")
      recorder = "#{tmp}/record.rb"
      # (The recording boot runs without Bootsnap's compile cache, which loads YAML's and msgpack's
      # files of its own: rails_test.rb compares the boots with the same Bootsnap setup.)
      bootsnaps = %r{/(?:bootsnap|msgpack)-[^/]+/}
      # (and in another order: rails_test.rb compares the order.)
      assert_same_loaded_features (stock.report["loaded_features"] - [recorder]).grep_v(bootsnaps).sort,
                                  warm.report["loaded_features"].grep_v(bootsnaps).sort, label
      figures = warm.report["figures"]
      served = warm.report["served"]
      compiled = stock.report["compiled"]
      assert_operator served.size, :>=, 200, "#{label}: #{figures.inspect}"
      assert_operator figures[:hits], :>=, served.size / 2, "#{label}: #{figures.inspect}"
      assert_equal "Loadscan::CompileCache::Front", warm.report["front"], "#{label}: loadscan's hook answers first"
      # The files of Bootsnap's YAML cache load only in the warm boot (the recording one has
      # Bootsnap's compile cache off): every other file served is compared.
      others = served.keys.reject { |path| compiled.key?(path) }
      assert_empty others.grep_v(bootsnaps), label
      differ = Loadscan::TestSupport::Iseqs.differ(served.slice(*compiled.keys), compiled, again.report["compiled"])
      assert_empty differ, "#{label}: served instruction sequences that differ from Ruby's compile"
    end
  end
end
