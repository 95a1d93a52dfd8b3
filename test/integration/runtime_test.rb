# frozen_string_literal: true

require_relative "../test_helper"

# What Ruby's runtime does around loadscan: GC compaction moving what it keeps, a require in a
# Ractor other than the main one, and a process that can start no thread for the scanner.
class RuntimeTest < Minitest::Test
  # Compaction moves objects (`$LOAD_PATH`'s Array among them) and updates only the references
  # the GC knows of: whatever loadscan keeps across calls must be pinned or marked. Apps compact
  # before forking workers (Puma's nakayoshi_fork) and Ruby may compact on its own (auto_compact).
  def test_requires_after_gc_compaction
    with_files([["a/before.rb", "$log << :before"], ["a/after.rb", "$log << :after"], ["b/later.rb", "$log << :later"]]) do |dir|
      code = <<~RUBY
        $log = []
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        require "before"
        require "set"
        3.times { GC.compact }
        if GC.respond_to?(:verify_compaction_references)
          # Moves every object that can move (the heap doubled, then compacted toward its empty end).
          heap = RUBY_VERSION < "3.2" ? { double_heap: true } : { expand_heap: true }
          GC.verify_compaction_references(toward: :empty, **heap)
        end
        out = { "after" => require("after"), "again" => require("before") }
        $LOAD_PATH.push(#{"#{dir}/b".inspect})
        GC.compact
        out["later"] = require("later")
        out["missing"] = begin; require("no_such_feature_here"); rescue LoadError => e; e.message; end
        GC.auto_compact = true
        GC.start
        out["json"] = require("json")
        report(out.merge("log" => $log, "loaded_features" => $LOADED_FEATURES.dup))
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_require_in_a_non_main_ractor
    # The binding leaves other Ractors to Ruby; the decorator must also be defined as
    # Ractor-safe (`rb_ext_ractor_safe(true)` around its definition in lib.rs's init), or Ruby
    # raises Ractor::UnsafeError before calling it. Remove this skip with that change.
    with_files([["a/in_ractor.rb", "IN_RACTOR = :loaded"]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        Warning[:experimental] = false
        r = Ractor.new { begin; require "in_ractor"; rescue Exception => e; e.class.name; end }.#{RACTOR_VALUE}
        report("r" => r, "const" => defined?(IN_RACTOR) && IN_RACTOR)
      RUBY
      assert_same_as_stock(code, ruby_opts: ["--disable-gems"])
    end
  end

  # Under a process limit (a container's pids limit, `prlimit --nproc`) the scanner starts the
  # threads it can, down to none besides the calling one. (RLIMIT_NPROC binds only non-root.)
  def test_scan_when_no_thread_can_be_started
    with_files([["a/deep/x.rb", "$loaded = :x"], ["a/y.rb", ""], ["b/z.rb", ""]]) do |dir|
      FileUtils.chmod_R("a+rX", dir)
      searchable_parent(dir)
      code = <<~RUBY
        Process.setrlimit(:NPROC, 0)
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect}, #{"#{dir}/b".inspect})
        r = %w[deep/x y z].map { |f| require f }
        report("r" => r, "loaded" => $loaded, "loaded_features" => $LOADED_FEATURES.dup,
               "hits" => (Loadscan.stats[:hits] if defined?(Loadscan)))
      RUBY
      env = { "LOADSCAN_THREADS" => "4", "LOADSCAN_LAZY" => "0", "LOADSCAN_CACHE" => "0" }
      stock, fast = run_both(code, env: env, as_nobody: true)
      assert_equal [stock.report["r"], :x], [fast.report["r"], fast.report["loaded"]]
      assert_same_loaded_features(stock.report["loaded_features"], fast.report["loaded_features"])
      assert_equal 3, fast.report["hits"], fast.stderr
    end
  end
end
