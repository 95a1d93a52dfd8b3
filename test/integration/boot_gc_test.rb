# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../../lib/loadscan"
require "json"

# GC deferred during the boot (Loadscan::BootGC), in a real Bundler app whose boot.rb does what
# config/boot.rb does (`require "bundler/setup"`, then `require "loadscan/setup"`) and then runs
# the test's BODY: the rest of the boot, `Loadscan.booted!` where a program says its boot is over,
# and what runs after. Each body runs stock too, where the test compares: what the app sees of
# GC (GC.disable's and GC.enable's answers, finalizers, WeakRefs, ObjectSpace) must be stock's.
class BootGCTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp

  BOOT = <<~RUBY
    GC.disable if ENV["APP_GC_DISABLE_FIRST"]
    Process.setrlimit(:NOFILE, Integer(ENV["APP_NOFILE"])) if ENV["APP_NOFILE"]
    require "bundler/setup"
    require "loadscan/setup" unless ENV["LOADSCAN_TEST_STOCK"]
    def report(value) = File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(value))
    def booted! = defined?(Loadscan.booted!) && Loadscan.booted!
    def gc_figures = defined?(Loadscan.stats) && Loadscan.stats ? Loadscan.stats[:gc] : nil
    def heap_mb = File.read("/proc/self/status")[/VmHWM:\\s+(\\d+)/, 1].to_i / 1024
    # GC runs while `n` short strings are made and dropped (enough for several runs in stock).
    def runs_while_allocating(n = 300_000)
      before = GC.count
      n.times { "x" * 64 }
      GC.count - before
    end
    load ENV.fetch("BOOT_BODY")
  RUBY

  # One app for the class (bundle lock once); each boot gets its own cache dir unless told.
  def self.app
    @app ||= begin
      dir = File.realpath(Dir.mktmpdir("loadscan-boot-gc"))
      Minitest.after_run { FileUtils.rm_rf(dir) }
      app = File.join(dir, "app")
      FileUtils.mkdir_p(app)
      App.lock(app, %w[rack])
      File.write(File.join(app, "boot.rb"), BOOT)
      FileUtils.mkdir_p(File.join(app, "config"))
      File.write(File.join(app, "config", "boot.rb"), "load File.expand_path(\"../boot.rb\", __dir__)\n")
      app
    end
  end

  # GC is deferred on Ruby 3.3+ only (Loadscan::TestSupport.gc_deferred?), and these programs have no
  # known end: LOADSCAN_GC=on unless told.
  DEFERS = Loadscan::TestSupport.gc_deferred?

  def setup
    skip "GC is not deferred here (Ruby 3.3 and later; on 3.3 with room for descriptors)" unless DEFERS || name.include?("doctor")
  end

  # `script`: the file Ruby runs (config/boot.rb loads boot.rb, as a Rails app's bin/rails does).
  def boot(body, stock: false, env: {}, script: "boot.rb")
    env = { "LOADSCAN_GC" => "on" }.merge(env)
    Dir.mktmpdir("loadscan-boot-body") do |tmp|
      file = File.join(tmp, "body.rb")
      File.write(file, body)
      run = run_ruby!(command: [App::RUBY, script], loadscan: stock ? false : nil, chdir: self.class.app, timeout: 120,
                      env: App.env(self.class.app).merge("BOOT_BODY" => file).merge(env))
      assert_empty run.stderr.lines.grep(/loadscan/), run.stderr
      run.report
    end
  end

  def test_no_gc_runs_during_the_boot_and_ruby_runs_it_after
    body = <<~RUBY
      during = runs_while_allocating
      watched = Thread.list.size == 1
      ended = booted!
      report("during" => during, "after" => runs_while_allocating, "enabled" => !GC.disable.tap { GC.enable },
             "threads" => Thread.list.size, "watched" => watched, "ended" => ended, "gc" => gc_figures)
    RUBY
    stock = boot(body, stock: true)
    assert_operator stock["during"], :>, 1, "the allocation makes stock run GC"
    fast = boot(body)
    assert_equal [0, true, true, 1, true], fast.values_at("during", "enabled", "watched", "threads", "ended"), fast.inspect
    assert_operator fast["after"], :>=, 1
    gc = fast["gc"]
    assert_equal [true, "booted", 0], gc.values_at(:deferred, :ended_by, :budget_runs), gc.inspect
    assert_equal gc[:runs_before_setup], gc[:runs], "no run between setup and booted!"
    assert_operator gc[:allocated_objects], :>=, gc[:allocated_objects_before_setup] + 300_000

    off = boot(body, env: { "LOADSCAN_GC" => "off" })
    assert_operator off["during"], :>, 1, "LOADSCAN_GC=off: GC runs during the boot"
    assert_equal [false, "booted", true], off["gc"].values_at(:deferred, :ended_by).push(off["watched"])
    assert_operator off["gc"][:runs], :>, off["gc"][:runs_before_setup]
  end

  # By default (LOADSCAN_GC=auto) GC is deferred only where the boot has a known end: set up from
  # a Rails app's config/boot.rb, or a program whose last boot said it had booted; a script that
  # never says so is not deferred.
  def test_by_default_only_a_boot_with_a_known_end_is_deferred
    Dir.mktmpdir("loadscan-cache") do |cache|
      auto = { "LOADSCAN_GC" => nil, "LOADSCAN_CACHE_DIR" => cache }
      figures = "report(gc_figures.slice(:deferred, :not_deferred))"
      assert_equal({ deferred: true, not_deferred: nil }, boot(figures, env: auto, script: "config/boot.rb"))
      script = boot(figures, env: auto)
      assert_equal [false, /no known end/], [script[:deferred], script[:not_deferred][/no known end/] && /no known end/]
      assert_equal false, boot("booted!\n#{figures}", env: auto)[:deferred], "its first boot: nothing known yet"
      assert_equal({ deferred: true, not_deferred: nil }, boot("#{figures}\nbooted!", env: auto), "it said booted! last time")
      assert_equal({ deferred: false, not_deferred: "off" }, boot(figures, env: auto.merge("LOADSCAN_GC" => "off"), script: "config/boot.rb"))
    end
  end

  # The app's own GC.disable and GC.enable during the boot answer as in stock, and the GC is left
  # as the app set it: disabled, it is never enabled again by loadscan.
  def test_an_app_that_disables_gc_keeps_it_disabled
    body = <<~RUBY
      answers = [GC.disable, runs_while_allocating(50_000), GC.disable, GC.enable, GC.disable]
      booted!
      answers << runs_while_allocating << GC.stat(:count)
      4.times { GC.start } # runs even when disabled, as always
      answers << GC.count - answers.last << GC.enable << GC.enable
      report(answers)
    RUBY
    stock = boot(body, stock: true)
    assert_equal [false, 0, true, true, false, 0], stock.first(6), stock.inspect
    assert_equal stock.values_at(0, 1, 2, 3, 4, 5, 7, 8, 9), boot(body).values_at(0, 1, 2, 3, 4, 5, 7, 8, 9)

    # Disabled before loadscan was set up: left alone, not deferred.
    first = { "APP_GC_DISABLE_FIRST" => "1" }
    body = <<~RUBY
      report([runs_while_allocating, booted!, runs_while_allocating, GC.enable, gc_figures&.fetch(:deferred)])
    RUBY
    assert_equal [0, nil, 0, true, nil], boot(body, stock: true, env: first)
    assert_equal [0, true, 0, true, false], boot(body, env: first)

    # Enabled again by the app during the boot: still deferred until the boot ends, then on.
    body = <<~RUBY
      answers = [GC.disable, GC.enable, runs_while_allocating]
      booted!
      report(answers << runs_while_allocating.positive? << GC.enable)
    RUBY
    assert_equal [false, true, 0, true, false], boot(body)
  end

  # A fork during the boot ends it in the parent first: the child starts with GC on, and so does
  # the parent after it; so does Process.daemon (which forks without Process._fork).
  def test_a_fork_ends_the_boot_and_a_child_never_starts_with_gc_off
    body = <<~RUBY
      out = ENV.fetch("LOADSCAN_TEST_REPORT") + ".child"
      Process.wait(fork { File.binwrite(out, Marshal.dump([!GC.disable.tap { GC.enable }, runs_while_allocating > 1, Thread.list.size])) })
      child = Marshal.load(File.binread(out))
      report("child" => child, "parent" => [!GC.disable.tap { GC.enable }, runs_while_allocating > 1],
             "ended_by" => gc_figures&.fetch(:ended_by))
    RUBY
    assert_equal({ "child" => [true, true, 1], "parent" => [true, true], "ended_by" => nil }, boot(body, stock: true))
    assert_equal({ "child" => [true, true, 1], "parent" => [true, true], "ended_by" => "fork" }, boot(body))

    Dir.mktmpdir("loadscan-daemon") do |tmp|
      out = File.join(tmp, "daemon.marshal")
      body = <<~RUBY
        Process.daemon(true, true)
        state = [!GC.disable.tap { GC.enable }, runs_while_allocating > 1, gc_figures[:ended_by]]
        File.binwrite(#{"#{out}.tmp".inspect}, Marshal.dump(state))
        File.rename(#{"#{out}.tmp".inspect}, #{out.inspect})
      RUBY
      boot_daemon = lambda do
        Dir.mktmpdir("loadscan-boot-body") do |dir|
          File.write(File.join(dir, "body.rb"), body)
          run_ruby(command: [App::RUBY, "boot.rb"], chdir: self.class.app,
                   env: App.env(self.class.app).merge("BOOT_BODY" => File.join(dir, "body.rb"), "LOADSCAN_GC" => "on"))
        end
      end
      assert boot_daemon.call.success?
      deadline = Time.now + 60
      sleep 0.05 until File.exist?(out) || Time.now > deadline
      assert_equal [true, true, "fork"], Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad
    end
  end

  # A boot that allocates far more than the last one (recorded beside the cache) is not deferred
  # past what the last one allocated.
  def test_a_boot_that_allocates_far_more_than_the_last_one_ends_at_its_mark
    Dir.mktmpdir("loadscan-cache") do |cache|
      env = { "LOADSCAN_CACHE_DIR" => cache }
      first = boot("report(gc_figures)", env: env)
      recorded = JSON.parse(File.read(File.join(cache, "last_boot.json"))).fetch("gc")
      assert_equal "exit", recorded["ended_by"]
      mark = recorded["boot_end_objects"]
      assert_operator mark, :>=, first[:allocated_objects]
      body = <<~RUBY
        runs = runs_while_allocating(#{20 * mark})
        report(gc_figures.merge(runs: runs))
      RUBY
      big = boot(body, env: env)
      assert_equal "allocated", big[:ended_by], big.inspect
      assert_operator big[:runs], :>, 1, "GC ran during the boot once it had allocated what the last one did"
      # It ends at the watchdog's next look (a few tenths of a second on a busy machine), well
      # before the body's own end.
      assert_operator big[:allocated_objects], :<, 16 * mark, "ended before the body did (#{mark} recorded)"
    end
  end

  # Memory stays bounded while GC is deferred, whatever survives: a sliding window of 64 KiB
  # strings (each lives for 200 more) is freed by the budget runs, which are full GCs (garbage
  # that survived a few minor ones was never freed before the end); the peak stays within a
  # budget (64 MiB) and some slack of stock's.
  def test_budget_runs_bound_a_boot_that_keeps_making_garbage
    body = <<~RUBY
      window = []
      8_000.times { window << "x" * 65_536; window.shift if window.size > 200 }
      report([heap_mb, gc_figures&.slice(:deferred, :budget_runs, :ended_by)])
    RUBY
    stock_mb, = boot(body, stock: true)
    mb, gc = boot(body)
    assert_equal true, gc[:deferred], gc.inspect
    assert_nil gc[:ended_by]
    assert_operator gc[:budget_runs], :>, 1, gc.inspect
    assert_operator mb, :<, stock_mb + 64 + 96, "#{mb} MB against stock's #{stock_mb} (#{gc.inspect}); 500 MB made"
  end

  # Pages of a mapped file are resident but no GC frees them: 192 MiB of a file mapped and read
  # during the deferral (as shared libraries and the compile cache's store are) call for no
  # budget run; the deferral counts anonymous memory (RssAnon), which a GC can give back.
  def test_mapped_file_pages_call_for_no_budget_run
    body = <<~RUBY
      Warning[:experimental] = false # IO::Buffer
      path = File.join(ENV.fetch("LOADSCAN_TEST_TMP"), "mapped.bin")
      File.open(path, "wb") { |f| f.truncate(192 << 20) }
      file = File.open(path, "rb")
      map = IO::Buffer.map(file, nil, 0, IO::Buffer::READONLY)
      (0...map.size).step(4096) { |at| map.get_value(:U8, at) }
      grew = File.read("/proc/self/status")[/RssFile:\\s+(\\d+)/, 1].to_i >> 10
      sleep 0.2 # ten ticks
      booted!
      report([grew, gc_figures&.slice(:deferred, :budget_runs, :ended_by)])
    RUBY
    Dir.mktmpdir("loadscan-mapped") do |tmp|
      grew, gc = boot(body, env: { "LOADSCAN_TEST_TMP" => tmp })
      assert_operator grew, :>=, 192, "the mapped file's pages were not resident (RssFile #{grew} MiB)"
      assert_equal [true, 0, "booted"], gc.values_at(:deferred, :budget_runs, :ended_by), gc.inspect
    end
  end

  # Anonymous memory Ruby does not count (a mapped IO::Buffer: 128 MiB touched) makes a budget run
  # when it grows by RESIDENT_BUDGET, which the tick reads each time: raised after setup (as the
  # benchmark's counted boots do, callgrind's memory being resident too), it makes none; put back,
  # the next tick makes the run (waited for: a loaded machine's ticks come late, never early).
  def test_the_resident_budget_is_read_at_every_tick
    body = <<~RUBY
      Warning[:experimental] = false # IO::Buffer
      now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
      set = lambda do |bytes|
        Loadscan::BootGC.send(:remove_const, :RESIDENT_BUDGET)
        Loadscan::BootGC.const_set(:RESIDENT_BUDGET, bytes)
      end
      default = Loadscan::BootGC::RESIDENT_BUDGET
      set.(Integer(ENV["APP_RESIDENT_BUDGET"])) if ENV["APP_RESIDENT_BUDGET"]
      buffer = IO::Buffer.new(128 << 20, IO::Buffer::MAPPED)
      buffer.clear(1)
      sleep 0.3 # fifteen ticks
      while_raised = gc_figures[:budget_runs]
      set.(default)
      deadline = now.() + 20
      sleep 0.01 until gc_figures[:budget_runs].positive? || now.() > deadline
      booted!
      report([while_raised, gc_figures&.slice(:deferred, :budget_runs, :ended_by)])
    RUBY
    _, default = boot(body)
    assert_equal [true, 1, "booted"], default.values_at(:deferred, :budget_runs, :ended_by), default.inspect
    while_raised, raised = boot(body, env: { "APP_RESIDENT_BUDGET" => (1 << 30).to_s })
    assert_equal 0, while_raised, "a budget run for 128 MiB with RESIDENT_BUDGET raised to 1 GiB"
    assert_equal [true, 1, "booted"], raised.values_at(:deferred, :budget_runs, :ended_by), raised.inspect
  end

  # Files left to GC keep their descriptors until a GC closes them: 256 more open than at the
  # last GC make a budget run, which closes those no longer referenced (stock's GCs would have).
  def test_files_left_to_gc_make_a_budget_run
    body = <<~RUBY
      open_fds = -> { Dir.children("/proc/self/fd").size }
      base = open_fds.call
      leaked = 0
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      until gc_figures[:budget_runs].positive? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        10.times { File.open(__FILE__) }
        leaked += 10
        sleep 0.001 # the tick's turn
      end
      report([leaked, open_fds.call - base, gc_figures.slice(:deferred, :budget_runs, :ended_by)])
    RUBY
    leaked, still_open, gc = boot(body)
    assert_equal [true, nil], gc.values_at(:deferred, :ended_by), gc.inspect
    assert_operator gc[:budget_runs], :>=, 1, "no budget run for #{leaked} Files left to GC"
    assert_operator leaked, :>=, 256, "a budget run before 256 Files were left: #{gc.inspect}"
    assert_operator still_open, :<, leaked, "the budget run closed none of the #{leaked} Files"
  end

  # Ruby 3.3 fails an `open` that runs out of descriptors while GC is disabled (3.4 collects and
  # retries): there a boot starts deferred only with FILES_HEADROOM descriptors free, and a
  # `Process.setrlimit` that leaves fewer ends the deferral at once (`files`), before the next open.
  def test_descriptors_free_on_ruby_3_3
    body = "report([gc_figures[:deferred], gc_figures[:not_deferred]])"
    deferred, why = boot(body, env: { "APP_NOFILE" => "4096" })
    if RUBY_VERSION < "3.4"
      assert_equal false, deferred
      assert_match(/\A\d+ file descriptors free \(Ruby #{RUBY_VERSION} needs 16384: `ulimit -n`\)\z/, why)
    else
      assert_equal [true, nil], [deferred, why]
    end

    body = <<~RUBY
      Process.setrlimit(:NOFILE, Dir.children("/proc/self/fd").size + 1_000)
      report(gc_figures.values_at(:deferred, :ended_by))
    RUBY
    assert_equal [true, RUBY_VERSION < "3.4" ? "files" : nil], boot(body)
  end

  # What the app sees of the GC when it runs late: a finalizer runs and a WeakRef dies when a GC
  # has run (GC.start during the boot, or the GCs after it), ObjectSpace sees what is alive.
  def test_finalizers_weakrefs_and_objectspace_are_stocks
    body = <<~RUBY
      require "weakref"
      Thing = Class.new
      log = []
      finalizer = ->(to) { proc { to << :finalized } } # a proc that does not hold the object
      make = -> { t = Thing.new; ObjectSpace.define_finalizer(t, finalizer.call(log)); WeakRef.new(t) }
      ref = make.call
      early = [ref.weakref_alive?, ObjectSpace.each_object(Thing).count <= 1]
      GC.start
      during = [!!ref.weakref_alive?, log.dup, ObjectSpace.each_object(Thing).count]
      ref = make.call
      booted!
      runs_while_allocating
      GC.start
      after = [!!ref.weakref_alive?, log, ObjectSpace.each_object(Thing).count]
      report([early, during, after])
    RUBY
    stock = boot(body, stock: true)
    assert_equal [[true, true], [false, [:finalized], 0], [false, %i[finalized finalized], 0]], stock
    assert_equal stock, boot(body)
  end

  # doctor names settings for the last boot's runs before setup (the part left when GC is
  # deferred; the whole boot where it is not), for this Ruby's heaps, sized from the objects live
  # there (twice them), not all it allocated; a boot with them runs GC no more often there.
  def test_doctor_names_the_settings_that_remove_the_runs_before_setup
    Dir.mktmpdir("loadscan-cache") do |cache|
      env = { "LOADSCAN_CACHE_DIR" => cache }
      last = boot("report(gc_figures)", env: env)
      assert_operator last[:runs_before_setup], :>, 0, "Ruby and bundler/setup run GC before setup"
      run = run_ruby(file: File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan"), args: %w[--json doctor], loadscan: nil,
                     chdir: self.class.app, env: App.env(self.class.app).merge(env), timeout: 120)
      advice = JSON.parse(run.stdout).fetch("gc_settings")
      # Not deferred (Ruby before 3.4): the settings cover the whole boot.
      part, runs = DEFERS ? ["before setup", last[:runs_before_setup]] : ["boot", last[:runs]]
      assert_equal [part, runs], advice.values_at("part", "last_runs"), advice.inspect
      names = advice["settings"].keys
      if RUBY_VERSION >= "3.3"
        # The heap most objects live in (3.3 to 4.0: heap 0's 40-byte slots; 4.1 puts 32-byte slots first).
        live = last[:heaps].map { |h| DEFERS ? h[:live_before_setup] : h[:live] }
        assert_includes names, "RUBY_GC_HEAP_#{live.index(live.max)}_INIT_SLOTS"
        assert_empty names - last[:heaps].each_index.map { |i| "RUBY_GC_HEAP_#{i}_INIT_SLOTS" } - %w[RUBY_GC_MALLOC_LIMIT]
      else
        assert_equal %w[RUBY_GC_HEAP_INIT_SLOTS], names - %w[RUBY_GC_MALLOC_LIMIT]
      end
      live = last[:heaps].map { |h| DEFERS ? h[:live_before_setup] : h[:live] }
      live = [live.sum] if RUBY_VERSION < "3.3"
      slots = names.grep(/INIT_SLOTS/).map { |n| [n[/HEAP_(\d)_/, 1].to_i, advice["settings"][n].to_i] }
      slots.each { |i, n| assert_operator n, :<=, (live[i] * 2) + 1000, "#{advice.inspect} against #{live}" }
      left = DEFERS ? "runs_before_setup" : "runs"
      assert_operator advice.dig("with_settings", left), :<=, runs, advice.inspect
      with = boot("report(gc_figures)", env: env.merge(advice["settings"]))
      assert_operator with[left.to_sym], :<=, runs
    end
  end

  def test_the_last_boots_record_carries_the_gc_figures
    Dir.mktmpdir("loadscan-cache") do |cache|
      boot("booted!\nruns_while_allocating\nreport(nil)", env: { "LOADSCAN_CACHE_DIR" => cache })
      gc = JSON.parse(File.read(File.join(cache, "last_boot.json"))).fetch("gc")
      assert_equal [true, "booted"], gc.values_at("deferred", "ended_by")
      assert_operator gc["runs_after_boot"], :>, 1
      assert_operator gc["heaps"].size, :>=, 1
      gc["heaps"].each { |heap| assert_operator heap["live"], :<=, heap["allocated"], heap.inspect }
      assert_equal "booted", gc["boot_end_by"]
      assert_operator gc["boot_end_objects"], :<, gc["allocated_objects"] + 1000, "recorded at booted!"
      # A program that says it has booted will say so again: no mark for it.
      record = -> { File.read(File.join(cache, "last_boot.json")) } # as setup reads it, from the cache dir
      assert_equal ["booted", gc["boot_end_objects"]], Loadscan::LastBoot.gc_end(record.(), gc["boot_key"])
      boot("runs_while_allocating\nreport(nil)", env: { "LOADSCAN_CACHE_DIR" => cache })
      gc = JSON.parse(File.read(File.join(cache, "last_boot.json"))).fetch("gc")
      assert_equal "exit", gc["boot_end_by"]
      assert_equal ["exit", gc["boot_end_objects"]], Loadscan::LastBoot.gc_end(record.(), gc["boot_key"])
      assert_nil Loadscan::LastBoot.gc_end(record.(), "another program")
    end
  end
end
