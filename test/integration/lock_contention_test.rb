# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/entry"

# Another thread holds loadscan's state (in an entry's `to_path`, or listing a big new entry with
# the GVL released) while this one forks, daemonizes, sets up again, is interrupted or is warned:
# nothing hangs, no child inherits a held lock, and the index goes on as stock's answers.
class LockContentionTest < Minitest::Test
  ENTRY = Loadscan::TestSupport::ENTRY

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
end
