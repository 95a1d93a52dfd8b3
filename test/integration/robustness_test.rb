# frozen_string_literal: true

require_relative "../test_helper"

# Faults and hostile timing (issue 12): Ruby code that runs while loadscan holds its state (an
# entry's `to_path`), interrupts and signals, switched symlinks, encodings, Ractors, failing
# thread creation, warnings asked for by one thread while another holds the state. Each case is
# compared with stock Ruby in a separate process, except where loadscan's own warnings are checked.
class RobustnessTest < Minitest::Test
  # An entry object whose `to_path` runs `action` on its first call only.
  ENTRY = <<~RUBY
    class Entry
      def initialize(path, &action) = (@path, @action = path, action)
      def to_path
        action, @action = @action, nil
        action&.call
        @path
      end
    end
  RUBY

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

  def test_to_path_shrinking_load_path_does_not_crash
    with_files([["a/shrunk.rb", "$loaded = :a"]]) do |dir|
      code = ENTRY + <<~RUBY
        keep = #{"#{dir}/a".inspect}
        fillers = (1..64).map { |i| "#{dir}/none\#{i}" }
        $LOAD_PATH.unshift(Entry.new(keep) { $LOAD_PATH.replace([$LOAD_PATH.first]); GC.start }, *fillers)
        r = require "shrunk"
        report("r" => r, "loaded" => $loaded, "load_path" => $LOAD_PATH.size)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_exception_from_to_path_is_raised_not_swallowed
    with_files([["a/once.rb", "$loaded = :a"]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.unshift(Entry.new(#{"#{dir}/a".inspect}) { raise ArgumentError, "from to_path" })
        r = begin; require "once"; rescue ArgumentError => e; e.message; end
        report("r" => r, "loaded" => $loaded)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_thread_kill_and_throw_in_to_path_are_not_swallowed
    with_files([["a/once.rb", "$loaded = true"]]) do |dir|
      code = ENTRY + <<~RUBY
        a = #{"#{dir}/a".inspect}
        out = {}
        Thread.new do
          $LOAD_PATH.unshift(Entry.new(a) { Thread.current.kill })
          require "once"
          out[:after_kill] = true
        end.join
        $LOAD_PATH.shift
        out[:caught] = catch(:stop) do
          $LOAD_PATH.unshift(Entry.new(a) { throw :stop, :thrown })
          require "once"
          :not_thrown
        end
        report(out)
      RUBY
      assert_same_as_stock(code)
    end
  end

  def test_signal_during_to_path_terminates_as_in_stock
    with_files([["a/once.rb", ""]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.unshift(Entry.new(#{"#{dir}/a".inspect}) { Process.kill(:TERM, Process.pid); sleep 5 })
        require "once"
        report("survived" => true)
      RUBY
      stock = run_ruby(code, loadscan: false)
      fast = run_ruby(code, loadscan: true)
      assert_equal Signal.list["TERM"], stock.status.termsig, stock.inspect
      assert_equal stock.status.termsig, fast.status.termsig, fast.stderr
      assert_nil fast.report
    end
  end

  # An interrupt that arrives while a require scans (here one queued for the next blocking
  # point, so that it is deterministic) is raised where stock Ruby raises it, and loadscan keeps
  # working. Where that is differs: 3.1 to 3.4 reach a blocking point inside `require` before the
  # file loads; 4.0 reaches none, loads the file and raises as the block ends. loadscan's lookup
  # (which lists the root with the GVL released) adds no blocking point of its own.
  def test_interrupt_during_scan_keeps_loadscan_working
    with_files([["a/first.rb", "$first = true"], ["a/second.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        raised = begin
          Thread.handle_interrupt(RuntimeError => :on_blocking) do
            Thread.current.raise "interrupted"
            require "first"
            :no
          end
        rescue RuntimeError => e
          e.message
        end
        second = require "second"
        stats = defined?(Loadscan) ? Loadscan.stats : {}
        report("raised" => raised, "first" => $first == true, "second" => second, "stats_alive" => !stats.nil?,
               "hits" => stats&.dig(:hits), "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, fast = run_both(code)
      assert_equal "interrupted", fast.report["raised"]
      assert_equal stock.report["first"], fast.report["first"], "first.rb loaded (or not) before the interrupt as with stock Ruby"
      assert_equal stock.report["second"], fast.report["second"]
      assert fast.report["stats_alive"], "loadscan stopped after the interrupt"
      assert_operator fast.report["hits"], :>=, 1, "the next require was not answered"
      assert_same_loaded_features(stock.report["loaded_features"], fast.report["loaded_features"])
    end
  end

  # White-box: listing a deferred directory is a blocking region (the GVL is released around
  # it), so an interrupt queued for the next blocking point is raised by the lookup itself.
  def test_lazy_listing_releases_the_gvl
    with_files([["a/top.rb", ""], ["a/deep/er/x.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        Loadscan.lookup("top") # lists the root, defers deep/
        inside = nil
        begin
          Thread.handle_interrupt(RuntimeError => :on_blocking) do
            Thread.current.raise "interrupted"
            Loadscan.lookup("deep/er/x")
            inside = :not_raised
          end
        rescue RuntimeError
        end
        report("inside" => inside, "answer" => Loadscan.lookup("deep/er/x"),
               "listed" => Loadscan.stats[:dirs_listed_lazily])
      RUBY
      fast = run_ruby(code, loadscan: true)
      assert fast.status.success?, fast.stderr
      assert_nil fast.report["inside"], "the lazy listing held the GVL"
      assert_equal "#{dir}/a/deep/er/x.rb", fast.report["answer"]
    end
  end

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

  def test_feature_name_in_another_encoding
    with_files([["a/café.rb", "$loaded = :utf8"], ["b/caf\xE9.rb".b, "$loaded = :raw"], ["b/café.rb", "$loaded = :b"]]) do |dir|
      code = <<~RUBY
        # encoding: utf-8
        Encoding.default_internal = Encoding::UTF_8
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect}, #{"#{dir}/b".inspect})
        r = require "caf\\xE9".dup.force_encoding("ISO-8859-1")
        report("r" => r, "loaded" => $loaded, "last" => $LOADED_FEATURES.last.b,
               "last_encoding" => $LOADED_FEATURES.last.encoding.name)
      RUBY
      # With RubyGems 3.5 (Ruby 3.3) in front, the name reaches loadscan converted already.
      [[], ["--disable-gems"]].each do |opts|
        _, fast = assert_same_as_stock(code, ruby_opts: opts)
        assert_equal :utf8, fast.report["loaded"], opts.inspect
      end
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

  # Issue 20, item 7. A fork while another thread holds loadscan's state (here: in an entry's
  # `to_path`, which runs under the state lock and sleeps, GVL released): the child must not
  # inherit a lock held by a thread it does not have, and keeps answering from the index.
  def test_fork_while_another_thread_holds_the_state
    with_files([["a/first.rb", ""], ["a/in_child.rb", "$in_child = true"]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        started = Queue.new
        thread = Thread.new do
          $LOAD_PATH.unshift(Entry.new(#{"#{dir}/none".inspect}) { started << 1; sleep 0.5 })
          require "first"
        end
        started.pop
        reader, writer = IO.pipe
        pid = fork do
          r = require "in_child"
          stats = defined?(Loadscan) ? Loadscan.stats : {}
          writer.write(Marshal.dump([r, $in_child, stats.nil?, stats&.dig(:hits)]))
          writer.close
          exit!(0)
        end
        writer.close
        child = Marshal.load(reader.read)
        Process.wait(pid)
        thread.join
        report("child" => child.first(3), "hits" => child[3], "status" => $?.exitstatus,
               "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, fast = run_both(code)
      assert_equal [true, true, false], stock.report["child"]
      assert_equal stock.report["child"], fast.report["child"], "the child's Loadscan.stats were nil: its state was locked"
      assert_operator fast.report["hits"], :>=, 1, "the child did not answer from the index"
      assert_same_loaded_features(stock.report["loaded_features"], fast.report["loaded_features"])
    end
  end

  # Issue 29, item 3. `Process.daemon` forks without `Process._fork` (libc's daemon(3)): called
  # while another thread lists a big new `$LOAD_PATH` entry (LOADSCAN_LAZY=0, GVL released,
  # loadscan's lock held), it left the daemon a lock held by a thread it does not have: stats
  # nil and every require left to Ruby for its whole life. The daemon keeps the pipes
  # (`noclose`), so the run ends when it does.
  def test_daemon_while_another_thread_lists
    big = (0...500).map { |i| ["big/d#{i / 100}/e#{i}", :dir] }
    files = [277, 499].map { |i| ["big/d#{i / 100}/e#{i}/f#{i}.rb", "$f = #{i}"] }
    with_files([*big, *files, ["a/in_daemon.rb", "$in_daemon = true"]]) do |dir|
      code = ENTRY + <<~RUBY
        $LOAD_PATH.push(#{"#{dir}/a".inspect})
        listing = Queue.new
        Thread.new do
          $LOAD_PATH.unshift(Entry.new(#{"#{dir}/none".inspect}) { listing << true }, #{"#{dir}/big".inspect})
          require "d2/e277/f277"
        end
        listing.pop
        Process.daemon(true, true)
        out = { "in_daemon" => [require("in_daemon"), $in_daemon], "big" => [require("d4/e499/f499"), $f] }
        stats = defined?(Loadscan) ? Loadscan.stats : {}
        out["locked"] = stats.nil?
        out["stats"] = stats&.slice(:hits)
        # (Whether the other thread's require was done before the fork depends on timing.)
        report(out.merge("loaded_features" => $LOADED_FEATURES.reject { _1.end_with?("/f277.rb") }))
      RUBY
      env = { "LOADSCAN_LAZY" => "0" }
      stock, fast = assert_same_as_stock(code, env: env, timeout: 20)
      assert_equal [[true, true], [true, 499], false], stock.report.values_at("in_daemon", "big", "locked")
      assert_operator fast.report["stats"][:hits], :>=, 2, "the daemon did not answer from the index"
    end
  end

  # `Loadscan.setup` with settings that change the index (here another cache dir) starts it
  # again, and starting waits for loadscan's lock, while another thread holds that lock listing a
  # new `$LOAD_PATH` entry of thousands of directories (LOADSCAN_LAZY=0) with the GVL released.
  # That thread needs the GVL back before it lets go of the lock: a start that waited for the
  # lock with the GVL held hung the process for good (deaf to SIGTERM too: run_ruby's timeout
  # ends it with SIGKILL). The first entry's `to_path` runs under the lock, just before the
  # listing: it tells the main thread when to set up again.
  def test_setup_restarting_the_index_while_another_thread_lists
    big = (0...2000).map { |i| ["big/d#{i / 100}/e#{i}", :dir] }
    files = [777, 1000, 1999].map { |i| ["big/d#{i / 100}/e#{i}/f#{i}.rb", "$f = #{i}"] }
    with_files([*big, *files, ["a/after.rb", "$after = true"]]) do |dir|
      code = ENTRY + <<~RUBY
        listing = Queue.new
        thread = Thread.new do
          $LOAD_PATH.unshift(Entry.new(#{"#{dir}/none".inspect}) { listing << true }, #{"#{dir}/big".inspect})
          require "d7/e777/f777"
        end
        listing.pop
        other = File.join(File.dirname(ENV.fetch("LOADSCAN_CACHE_DIR")), "other")
        setup = defined?(Loadscan) ? Loadscan.setup(cache_dir: other) : true
        out = { "thread" => thread.value, "setup" => setup, "f" => $f }
        $LOAD_PATH.push(#{"#{dir}/a".inspect})
        out["after"] = [require("d19/e1999/f1999"), require("after"), $f, $after]
        out["missing"] = begin; require("d1/none"); rescue LoadError => e; e.message; end
        out["resolved"] = $LOAD_PATH.resolve_feature_path("d10/e1000/f1000")
        out["stats"] = Loadscan.stats.slice(:hits).merge(cache_dir: Loadscan.config.cache_dir) if defined?(Loadscan)
        report(out.merge("loaded_features" => $LOADED_FEATURES.dup))
      RUBY
      env = { "LOADSCAN_LAZY" => "0" }
      stock = run_ruby(code, loadscan: false, env: env)
      fast = run_ruby(code, loadscan: true, env: env, timeout: 10)
      assert stock.success?, stock.stderr
      assert fast.success?, "the loadscan run hung (#{fast.status.inspect}):\n#{fast.stderr}"
      assert_same_run(stock, fast)
      assert_equal "other", File.basename(fast.report["stats"][:cache_dir]), "the index was not started again"
      assert_operator fast.report["stats"][:hits], :>=, 2, "the restarted index did not answer"
    end
  end

  # The same restart, interrupted while it waits for the lock: Ruby keeps the GVL while an
  # interrupt is pending for a thread, so a wait that only slept with the GVL released until
  # the lock was free slept with it held, forever (here for `Thread#raise` from another thread,
  # SIGINT's `Interrupt`, and a `trap` handler that raises nothing). The interrupt must come out
  # of `setup` (stock, waiting for the holder, sees the same) with the index as it was (an
  # interrupted restart changes nothing: the old index, its settings and its cache dir go on, and
  # setting up on the new ones again starts the index on them); a trap handler runs and the
  # restart goes on. The holder keeps the lock 0.8 s (an entry's
  # `to_path`, run under it); the interrupt comes 0.2 s into the wait.
  def test_setup_interrupted_while_another_thread_holds_the_lock
    with_files([["a/first.rb", ""], *%w[one two three four].map { |f| ["a/#{f}.rb", "$#{f} = true"] }]) do |dir|
      code = ENTRY + <<~RUBY
        caches = File.dirname(ENV.fetch("LOADSCAN_CACHE_DIR"))
        main = Thread.current
        out = { "stats" => [] }
        # The cache dir in effect, and where the index in use writes its cache (those written so far).
        saved = lambda do
          Loadscan.save
          [File.basename(Loadscan.config.cache_dir), Dir.glob("*/loadscan.cache", base: caches).map { |f| File.dirname(f) }.sort]
        end
        $LOAD_PATH.push(#{"#{dir}/a".inspect})
        restart = lambda do |name, feature, &interrupt|
          held = Queue.new
          holder = Thread.new do
            $LOAD_PATH.unshift(Entry.new(#{"#{dir}/none".inspect}) { held << true; sleep 0.8 })
            require "first"
          end
          held.pop
          Thread.new { sleep 0.2; interrupt.call }
          setup = begin
            defined?(Loadscan) ? Loadscan.setup(cache_dir: File.join(caches, name)) : holder.join && true
          rescue Exception => e
            [e.class.name, e.message]
          end
          out[name] = [setup, holder.value, require(feature), $LOAD_PATH.resolve_feature_path(feature)]
          out["stats"] << saved.call if defined?(Loadscan)
        end
        restart.("raised", "one") { main.raise("raised while waiting") }
        trap(:INT) { out["trap"] = :ran }
        restart.("trapped", "two") { Process.kill(:INT, Process.pid) }
        trap(:INT, "DEFAULT")
        restart.("interrupted", "three") { Process.kill(:INT, Process.pid) }
        out["again"] = defined?(Loadscan) ? Loadscan.setup(cache_dir: File.join(caches, "interrupted")) : true
        out["four"] = [require("four"), $one, $two, $three, $four]
        out["missing"] = begin; require("none_of_these"); rescue LoadError => e; e.message; end
        out["stats"] << saved.call << Loadscan.stats[:hits] if defined?(Loadscan)
        report(out.merge("loaded_features" => $LOADED_FEATURES.dup))
      RUBY
      stock = run_ruby(code, loadscan: false)
      fast = run_ruby(code, loadscan: true, timeout: 10)
      assert stock.success?, stock.stderr
      assert fast.success?, "the loadscan run hung (#{fast.status.inspect}):\n#{fast.stderr}"
      assert_equal [["RuntimeError", "raised while waiting"], true], stock.report["raised"].first(2)
      assert_equal [true, :ran, ["Interrupt", ""]], [stock.report["trapped"][0], stock.report["trap"], stock.report["interrupted"][0]]
      assert_same_run(stock, fast)
      raised, trapped, interrupted, again, hits = fast.report["stats"]
      assert_equal [["cache", %w[cache]], ["trapped", %w[cache trapped]]], [raised, trapped], "an interrupted restart changed the index or its settings, or a trap stopped the restart"
      assert_equal trapped, interrupted, "an interrupted restart changed the index or its settings"
      assert_equal ["interrupted", %w[cache interrupted trapped]], again, "setting up again did not start the index on the new cache dir"
      assert_operator hits, :>=, 1, "the restarted index did not answer"
    end
  end

  # Issue 19: a problem a scan found is warned even when another thread asked for the warnings
  # while this one still held loadscan's state, GVL released (the asker found the state busy and
  # must leave them pending, not drop them). Each round, a require lists a directory holding a
  # file it cannot `stat` (its target is in a directory user nobody may not search: a new
  # problem), then misses, which stats the feature's directory in each of 2000 entries
  # (`confirm_missing`) with the state held, while another thread loops on requires. Every
  # round, every problem must have reached the warning by the next require once that thread is
  # done. (On the unfixed code every round lost its problem, on 3.1, 3.3 and 3.4.)
  def test_problem_found_while_another_thread_requires_is_warned
    rounds = 10
    entries = (0...2000).map { |i| ["f/#{i}", :dir] } + [["e/hit.rb", ""], ["locked/c.rb", ""]] +
              (0...rounds).map { |i| ["e/d#{i}/c.rb", :symlink, "../../locked/c.rb"] }
    with_files(entries) do |dir|
      FileUtils.chmod_R("a+rX", dir)
      File.chmod(0o700, "#{dir}/locked")
      code = <<~RUBY
        handed = []
        Loadscan::Warnings.singleton_class.prepend(Module.new do
          define_method(:scan_problems) do |problems|
            handed.concat(problems.map(&:last))
            super(problems)
          end
        end)
        $LOAD_PATH.concat((0...2000).map { |i| "#{dir}/f/\#{i}" } << #{"#{dir}/e".inspect})
        require "hit"
        before = Loadscan.problems.size
        unwarned = (0...#{rounds}).map do |i|
          stop = false
          requires = 0
          other = Thread.new do
            until stop
              require "hit"
              requires += 1
              # Hands the GVL back at once: on 3.3 and 3.4 a thread that never blocks otherwise
              # kept it for seconds from the one coming back from its GVL-free work.
              Thread.pass
            end
          end
          Thread.pass until requires.positive?
          begin
            require "d\#{i}/nope"
          rescue LoadError
          end
          stop = true
          other.join
          require "hit"
          found = Loadscan.problems.drop(before).map(&:last)
          [found.size, found - handed]
        end
        report(unwarned)
      RUBY
      run = run_ruby(code, loadscan: true, as_nobody: true)
      assert run.success?, run.stderr
      assert_equal (1..rounds).to_a, run.report.map(&:first), "each round finds one new problem"
      lost = run.report.each_with_index.filter_map do |(_, unwarned), round|
        "round #{round}: #{unwarned.map { _1[%r{e/d\d+/c\.rb}] }.join(" ")}" unless unwarned.empty?
      end
      assert_empty lost, "problems never warned"
      assert_match %r{loadscan: left to Ruby's require: #{Regexp.escape(dir)}/e/d0/c\.rb: unreadable}, run.stderr
    end
  end

  # Issue 20, item 14. The strings loadscan builds have the encodings Ruby's own give: a miss's
  # `LoadError#message` is ASCII-8BIT for an ASCII feature (the feature's encoding otherwise),
  # and a found path is in the file system's encoding for a binary or US-ASCII feature, so it is
  # `==` to `File.expand_path` of the file (the feature's encoding otherwise).
  def test_encodings_of_messages_and_paths_as_in_stock
    with_files([["a/found.rb", ""], ["a/café.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        features = ["found", "café"].product(%w[BINARY US-ASCII UTF-8 ISO-8859-1]).map do |f, enc|
          f.dup.force_encoding(enc)
        end.reject { |f| !f.valid_encoding? }
        paths = features.map do |f|
          path = $LOAD_PATH.resolve_feature_path(f)[1]
          [f.encoding.name, path.encoding.name, path == File.expand_path(#{"#{dir}/a/".inspect} + f.b + ".rb")]
        end
        messages = ["nope", "nopé", "nopé".b, "nope".encode("US-ASCII")].map do |f|
          require f
        rescue LoadError => e
          [f.encoding.name, e.message.encoding.name, e.message.b]
        end
        require "found".b
        report("paths" => paths, "messages" => messages, "last" => $LOADED_FEATURES.last.encoding.name,
               "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, = assert_same_as_stock(code)
      assert_includes stock.report["paths"], ["ASCII-8BIT", "UTF-8", true]
    end
  end
end
