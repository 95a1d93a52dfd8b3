# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require "json"
require_relative "../../fixtures/rails_app"

# What a stock program does never fails, hangs or grows because GC is deferred during the boot
# (issue 34's round-4 scenarios): each program runs stock, with loadscan's default (LOADSCAN_GC
# auto: a script has no known end, so GC is not deferred) and with LOADSCAN_GC=on (deferred where
# this Ruby can: 3.3+), and must do what stock does.
class BootGCSafetyTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP
  MODES = { "default" => {}, "on" => { "LOADSCAN_GC" => "on" }, "off" => { "LOADSCAN_GC" => "off" } }.freeze

  # `code` after loadscan's setup (none for stock); its report.
  def run_modes(code, **opts)
    stock = run_ruby!(code, loadscan: false, timeout: 120, **opts)
    MODES.to_h do |name, env|
      run = run_ruby!(code, loadscan: true, timeout: 120, **opts, env: env.merge(opts.fetch(:env, {})))
      assert_empty run.stderr.lines.grep(/loadscan|FiberError|EMFILE/), "#{name}: #{run.stderr}"
      [name, run.report]
    end.merge("stock" => stock.report)
  end

  def peak_mb = 'File.read("/proc/self/status")[/VmHWM:\s+(\d+)/, 1].to_i / 1024.0'

  # Each call makes a Fiber whose stack only a GC gives back: 50,000 of them ran out of mappings
  # at 432 MB with GC disabled for the whole run.
  def test_fibers_made_and_dropped_are_freed
    reports = run_modes(<<~RUBY)
      50_000.times { (1..2).zip(3..4) }
      report([#{peak_mb}, defined?(Loadscan.stats) && Loadscan.stats ? Loadscan.stats[:gc].values_at(:deferred, :ended_by) : nil])
    RUBY
    # loadscan's own memory (its index) is LOADSCAN_GC=off's peak less stock's.
    off = reports["off"].first
    default_mb, (deferred, _) = reports["default"]
    assert_equal false, deferred, "a script has no known end: not deferred by default"
    assert_in_delta off, default_mb, off * 0.2, reports.inspect
    on_mb, (on_deferred, ended_by) = reports["on"]
    assert_equal Loadscan::TestSupport.gc_deferred?, on_deferred
    return unless on_deferred

    # Deferred, it finishes (with GC disabled throughout it died at 432 MB): twice in a row the
    # process grew by 64 MiB that Ruby does not count (fiber stacks), a budget run freed the fibers,
    # and GC runs on Ruby's own schedule from there (at every run the stacks Ruby pools had grown by
    # 64 MiB: it peaked at 266 MB on 3.4). Ruby's own copy, loadscan's index: off's peak.
    assert_equal "memory", ended_by, reports.inspect
    assert_operator on_mb, :<, off + (3 * 64), reports.inspect
  end

  # 2,000 Files left for GC to close under a limit of 1,024 descriptors: Ruby collects and
  # retries when `open` fails with EMFILE, which it did not with GC disabled (3.1, 3.3).
  def test_files_left_to_gc_under_a_descriptor_limit
    reports = run_modes(<<~RUBY)
      Process.setrlimit(:NOFILE, 1024)
      opened = 0
      2_000.times { File.open(__FILE__); opened += 1 }
      report(opened)
    RUBY
    assert_equal({ "stock" => 2_000, "default" => 2_000, "on" => 2_000, "off" => 2_000 }, reports)
  end

  # No thread of loadscan's: joining every other thread returns at once, and a thread waiting on
  # nothing gets Ruby's deadlock report at once (both waited for the 60 s watchdog).
  def test_no_thread_to_join_and_deadlocks_are_reported
    reports = run_modes(<<~RUBY)
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      others = Thread.list - [Thread.current]
      others.each(&:join)
      dead = begin
        Queue.new.pop
      rescue Exception => e
        e.message[/No live threads left/]
      end
      report([others.size, dead, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 20])
    RUBY
    assert_equal [[0, "No live threads left", true]] * 4, reports.values, reports.inspect
  end

  # Where no thread can be made (RLIMIT_NPROC used up, as nobody: root's is not enforced), a
  # boot that stock survives boots.
  def test_a_boot_under_a_thread_limit
    code = <<~RUBY
      Process.setrlimit(:NPROC, 1)
      require #{SETUP.inspect} if ENV["T_LOADSCAN"]
      require "set"
      report([Set.new([1]).size, defined?(Loadscan.stats) && Loadscan.stats ? Loadscan.stats[:gc][:deferred] : nil])
    RUBY
    stock = run_ruby(code, loadscan: false, as_nobody: true)
    assert_equal [1, nil], stock.report, stock.stderr
    MODES.each_value do |env|
      run = run_ruby(code, loadscan: false, as_nobody: true, env: env.merge("T_LOADSCAN" => "1", "LOADSCAN_TEST_STOCK" => nil))
      assert_equal [1, false], run.report, "#{env}: #{run.stderr}"
    end
  end

  # After the boot nothing of the deferral is left on GC: a Ractor may switch GC off and on
  # (Ractor::IsolationError for the life of the process), GC.stress= too.
  def test_a_ractor_switches_gc_after_the_boot
    skip "Ractor.main needs Ruby 3.3" if RUBY_VERSION < "3.3"
    reports = run_modes(<<~RUBY)
      Warning[:experimental] = false
      defined?(Loadscan.booted!) && Loadscan.booted!
      r = Ractor.new { [GC.disable, GC.enable, (GC.stress = false)] }
      report([r.respond_to?(:value) ? r.value : r.take, GC.singleton_class.instance_methods(false).grep(/loadscan/)])
    RUBY
    assert_equal [[[false, true, false], []]] * 4, reports.values, reports.inspect
  end

  # What the deferral reports of itself in a run (nil for stock or before setup).
  GC_FIGURES = "(defined?(Loadscan.stats) && Loadscan.stats ? Loadscan.stats[:gc].values_at(:deferred, :ended_by) : nil)"

  # Timeout.timeout(1) around allocating work that would run for 6 s raises Timeout::Error, as
  # stock (issue 47: the tick's `rescue Exception` took it while a budget run held the thread,
  # and the block ran to its own end). Budget runs are due every few ticks here: a live heap to
  # mark, and 200-byte strings made without pause.
  def test_a_timeout_inside_the_boot_is_raised
    reports = run_modes(<<~RUBY)
      require "timeout"
      keep = Array.new(300_000) { |i| "k" * (i % 40) }
      clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
      t = clock.()
      outcome = begin
        Timeout.timeout(1) do
          "x" * 200 until clock.() - t > 6
          :ran_to_its_end
        end
      rescue Timeout::Error => e
        e.class.name
      end
      report([outcome, keep.size, #{GC_FIGURES}&.first])
    RUBY
    assert_equal ["Timeout::Error", 300_000], reports.fetch("stock").first(2)
    reports.each { |name, (outcome, kept)| assert_equal ["Timeout::Error", 300_000], [outcome, kept], "#{name}: #{reports.inspect}" }
    assert_equal Loadscan::TestSupport.gc_deferred?, reports.fetch("on").last, reports.inspect
  end

  # The app turns GC off, then allocates 200 MB: no GC runs, a finalizer does not run and a
  # WeakMap keeps its value, as stock (issue 47: budget runs ran meanwhile); after the boot
  # GC is still off (never enabled by loadscan).
  def test_gc_the_app_disabled_does_not_run
    reports = run_modes(<<~RUBY)
      GC.disable
      before = GC.count
      finalized = []
      ObjectSpace.define_finalizer(Object.new, proc { finalized << 1 })
      map = ObjectSpace::WeakMap.new
      key = Object.new
      map[key] = Object.new
      kept = []
      200.times { kept << ("x" * (1 << 20)); kept.clear if kept.size > 8 }
      defined?(Loadscan.booted!) && Loadscan.booted!
      report([GC.count - before, finalized.size, map.key?(key), GC.disable, #{GC_FIGURES}&.first])
    RUBY
    assert_equal [0, 0, true, true, nil], reports.fetch("stock")
    reports.each { |name, r| assert_equal [0, 0, true, true], r.first(4), "#{name}: #{reports.inspect}" }
    assert_equal Loadscan::TestSupport.gc_deferred?, reports.fetch("on").last, reports.inspect
  end

  # Two fibers under a Fiber scheduler share a counter and do no IO: they end at stock's total
  # (issue 47: the tick read /proc through the scheduler, which switched fibers in the middle of
  # their work). `work` is a Ruby method: its return is an interrupt check, where the tick runs.
  def test_fibers_under_a_scheduler_are_not_switched_by_the_deferral
    reports = run_modes(<<~RUBY)
      class Scheduler
        def initialize = @ready = []
        def fiber(&block) = Fiber.new(blocking: false, &block).tap(&:resume)
        def blocking_operation_wait(work) = (pass; work.call)
        def io_wait(_io, events, _timeout) = (pass; events)
        def kernel_sleep(*) = pass
        def block(*) = pass
        def unblock(*) = nil
        def fiber_interrupt(fiber, exception) = fiber.raise(exception)
        def close = (@ready.shift.resume until @ready.empty?)

        private

        def pass
          @ready << Fiber.current
          Fiber.yield
        end
      end
      def work = "x" * 100
      counter = 0
      Fiber.set_scheduler(Scheduler.new)
      2.times { Fiber.schedule { 300_000.times { c = counter; work; counter = c + 1 } } }
      Fiber.set_scheduler(nil)
      report([counter, #{GC_FIGURES}&.first])
    RUBY
    assert_equal [600_000, nil], reports.fetch("stock")
    reports.each { |name, (counter, _)| assert_equal 600_000, counter, "#{name}: #{reports.inspect}" }
    assert_equal Loadscan::TestSupport.gc_deferred?, reports.fetch("on").last, reports.inspect
  end

  # A Ractor makes about 1 GB of short-lived strings while the main thread waits for it: the peak
  # resident size stays near stock's (issue 47: 1,784 MB against 13 MB; the tick runs only in the
  # main Ractor, whose thread was blocked). loadscan's own memory is LOADSCAN_GC=off's peak.
  def test_a_ractor_allocating_while_the_main_thread_waits
    skip "Ractor.main needs Ruby 3.3" if RUBY_VERSION < "3.3"
    reports = run_modes(<<~RUBY)
      Warning[:experimental] = false
      r = Ractor.new { 1_000_000.times { "x" * 1000 }; :done }
      done = r.#{Loadscan::TestSupport::RubyProcess::RACTOR_VALUE}
      report([done, #{peak_mb}, #{GC_FIGURES}])
    RUBY
    reports.each_value { |done, _| assert_equal :done, done, reports.inspect }
    stock = reports.fetch("stock")[1]
    off = reports.fetch("off")[1]
    assert_operator off, :<, stock + 150, reports.inspect
    %w[on default].each { |name| assert_operator reports.fetch(name)[1], :<, off + 150, "#{name}: #{reports.inspect}" }
    assert_equal (Loadscan::TestSupport.gc_deferred? ? [true, "ractor"] : [false, nil]), reports.fetch("on").last, reports.inspect
  end

  # A Rails app set up without the railtie: the tick sees it initialized and ends the boot as
  # after_initialize does, DISABLE_BOOTSNAP_LOAD_PATH_CACHE taken back (issue 47: it stayed set
  # for the app's child processes). A Rails stand-in: `Rails.application`'s `@initialized`.
  def test_a_rails_app_without_the_railtie_takes_back_the_bootsnap_variable
    code = <<~RUBY
      module Rails; end
      app = Object.new
      def app.initialized? = @initialized
      app.instance_variable_set(:@initialized, true)
      Rails.instance_variable_set(:@application, app)
      600.times do
        g = #{GC_FIGURES}
        break unless g && g.first && !g.last
        sleep 0.05
      end
      report([ENV["DISABLE_BOOTSNAP_LOAD_PATH_CACHE"], #{GC_FIGURES}])
    RUBY
    assert_equal [nil, nil], run_ruby!(code, loadscan: false).report
    on = run_ruby!(code, loadscan: true, env: { "LOADSCAN_GC" => "on" }).report
    assert_equal (Loadscan::TestSupport.gc_deferred? ? [nil, [true, "rails"]] : ["loadscan", [false, nil]]), on
  end

  # A finalizer run by a budget run ends the boot (`Loadscan.booted!`) and switches GC: the tick
  # holds nothing of its own meanwhile, and the program goes on as stock's.
  def test_a_finalizer_that_ends_the_boot_during_a_budget_run
    reports = run_modes(<<~RUBY)
      ended = []
      finalizer = proc { ended << (defined?(Loadscan.booted!) && Loadscan.booted!); GC.disable; GC.enable }
      100.times { ObjectSpace.define_finalizer(Object.new, finalizer) }
      keep = []
      200.times { keep << ("x" * (1 << 20)); keep.clear if keep.size > 8 }
      GC.start
      report([ended.size, GC.disable, #{GC_FIGURES}])
    RUBY
    assert_equal 100, reports.fetch("stock").first, reports.inspect
    reports.each { |name, (size, disabled, _)| assert_equal [100, false], [size, disabled], "#{name}: #{reports.inspect}" }
    assert_equal [Loadscan::TestSupport.gc_deferred?, "booted"], reports.fetch("on").last, reports.inspect
  end

  # A Rack app that is not Rails, under Puma's cluster mode with preload (through Bundler, a real
  # Gemfile.lock, this Ruby's Puma from bin/setup-rails-gems): Puma warns about threads started
  # in the app's boot; loadscan starts none.
  def test_puma_cluster_with_preload_logs_no_thread_warning
    gems = Fixtures::RailsApp
    skip "no Puma for this Ruby (bin/setup-rails-gems)" if Dir[File.join(gems.home, "specifications", "puma-*.gemspec")].empty?
    Dir.mktmpdir("loadscan-puma") do |dir|
      app = File.join(File.realpath(dir), "app")
      FileUtils.mkdir_p(app)
      env = { "GEM_HOME" => gems.home, "GEM_PATH" => gems.gem_dirs.join(File::PATH_SEPARATOR), "NIO4R_PURE" => "true" }
      App.lock(app, %w[rack puma], extra_env: env)
      # The app sets loadscan up in its own boot, which Puma watches for threads.
      File.write(File.join(app, "config.ru"), <<~RUBY)
        require "loadscan/setup" unless ENV["LOADSCAN_TEST_STOCK"]
        run ->(_) { [200, {}, ["ok"]] }
      RUBY
      File.write(File.join(app, "puma.rb"), "workers 2\npreload_app!\nbind \"unix://#{app}/puma.sock\"\n")
      { "stock" => { "LOADSCAN_TEST_STOCK" => "1" } }.merge(MODES).each do |name, mode|
        log = puma_log(app, App.env(app).merge(env).merge(mode))
        assert_match(/Worker 1 \(PID: \d+\) booted/, log, "#{name}: Puma booted")
        refute_match(/Detected \d+ Thread/, log, "#{name}: no thread warning")
      end
    end
  end

  private

  # Puma's output from its start until both workers booted (then it is stopped).
  def puma_log(app, env)
    log = File.join(app, "puma.log")
    File.write(log, "")
    # `ruby -S`: Debian's Puma (3.3's stack) has a binstub for /usr/bin/ruby.
    pid = Process.spawn(env, File.join(App::BINDIR, "bundle"), "exec", App::RUBY, "-S", "puma", "-C", "puma.rb",
                        chdir: app, out: log, err: %i[child out], pgroup: true)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 90
    sleep 0.2 until File.read(log).include?("Worker 1 (PID") || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    File.read(log)
  ensure
    if pid
      begin
        Process.kill(:TERM, -pid)
      rescue SystemCallError
        nil
      end
      Process.wait(pid)
    end
  end
end
