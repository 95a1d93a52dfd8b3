# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require "json"
require_relative "../../fixtures/rails_app"

# What a stock program does never fails, hangs or grows because GC is deferred during the boot
# (issue 34's round-4 scenarios): each program runs stock, with loadscan's default (LOADSCAN_GC
# auto: a script has no known end, so GC is not deferred) and with LOADSCAN_GC=on (deferred where
# this Ruby can: 3.4+), and must do what stock does.
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
    assert_equal RUBY_VERSION >= "3.4", on_deferred
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
