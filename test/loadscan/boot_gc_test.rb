# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../lib/loadscan"
require_relative "../../lib/loadscan/boot_gc"

# Loadscan::BootGC's decisions, each in milliseconds: when GC is deferred (pure: `why_not`,
# `mark`), and, in a fork of this process (in_fork: GC's state dies with the child), how the
# deferral ends, its budget, and the app's own GC switch. The boots of real programs are
# test/integration/boot_gc_test.rb and boot_gc_safety_test.rb.
class BootGCTest < Minitest::Test
  BootGC = Loadscan::BootGC
  NO_END = "no known end of the boot (LOADSCAN_GC=on defers it anyway)"

  def test_when_the_deferral_starts
    why = ->(mode, last_end = nil, rails: false, ruby: "3.4.5", linux: true, ractors: 1, files_free: 100_000) do
      BootGC.why_not(mode, last_end, rails, ruby: ruby, linux: linux, ractors: ractors, files_free: files_free)
    end
    assert_nil why.(true)
    assert_nil why.(:auto, rails: true)
    assert_nil why.(:auto, ["rails", 10])
    assert_nil why.(:auto, ["booted", 10])
    assert_nil why.(true, ["exit", 10])
    assert_nil why.(true, ruby: "4.0.2")
    assert_equal NO_END, why.(:auto)
    assert_equal NO_END, why.(:auto, ["exit", 10])
    assert_equal NO_END, why.(:auto, ["allocated", 10])
    assert_equal "off", why.(false, ["booted", 10], rails: true)
    assert_equal "off", why.(false, ruby: "3.1.2")
    assert_equal "Ruby 3.1.2 (3.3 and later on Linux only)", why.(:auto, rails: true, ruby: "3.1.2")
    assert_equal "Ruby 3.4.5 (3.3 and later on Linux only)", why.(true, linux: false)
    # Ruby 3.3 fails an `open` that runs out of descriptors while GC is disabled: it needs room.
    assert_nil why.(true, ruby: "3.3.8")
    assert_nil why.(true, ruby: "3.3.8", files_free: nil)
    assert_nil why.(true, ruby: "3.3.8", files_free: BootGC::FILES_HEADROOM)
    assert_equal "1000 file descriptors free (Ruby 3.3.8 needs 16384: `ulimit -n`)", why.(true, ruby: "3.3.8", files_free: 1000)
    assert_nil why.(true, files_free: 1000), "Ruby 3.4 collects for them itself"
    assert_equal "Ractors running", why.(true, ractors: 2)
    assert_equal "Ractors running", why.(:auto, rails: true, ractors: 3)
    assert_equal NO_END, why.(:auto, ractors: 2)
    assert_equal "off", why.(false, ractors: 2)
  end

  # The `allocated` end is kept only from a last boot that exited without saying it had booted.
  def test_the_mark_comes_from_a_last_boot_that_only_exited
    assert_equal 1234, BootGC.mark(["exit", 1234])
    assert_nil BootGC.mark(["booted", 1234])
    assert_nil BootGC.mark(["rails", 1234])
    assert_nil BootGC.mark(nil)
  end

  def test_the_process_as_it_is
    assert_equal RUBY_VERSION >= "3.3" && File.readable?("/proc/self/status"), BootGC.supported?
    assert_equal "off", BootGC.why_not(false, nil, false)
    if BootGC.supported?
      assert_nil BootGC.why_not(true, nil, false, files_free: 100_000)
    else
      assert_equal "Ruby #{RUBY_VERSION} (3.3 and later on Linux only)", BootGC.why_not(true, nil, false)
    end
    soft, = Process.getrlimit(:NOFILE)
    assert_equal soft - Dir.children("/proc/self/fd").size, BootGC.files_free unless soft == Process::RLIM_INFINITY
  end

  def test_booted_ends_it_once_and_is_the_next_boots_end
    gc = deferred do
      first = BootGC.finish(:booted)
      [first, BootGC.deferring?, BootGC.finish(:booted), BootGC.finish(:exit)]
    end
    assert_equal [true, false, false, false], gc[:value]
    assert_equal [true, "booted", "booted"], gc.values_at(:deferred, :ended_by, :boot_end_by)
    assert_operator gc[:boot_end_objects], :>, 0
  end

  def test_rails_after_initialize_ends_it
    gc = deferred { Loadscan.end_boot(:rails) }
    assert_equal [true, "rails", "rails"], gc.values_at(:value, :ended_by, :boot_end_by)
  end

  # An app without the railtie: the tick sees Rails.application initialized.
  def test_the_tick_sees_a_rails_app_initialized
    gc = deferred do
      app = Object.new
      app.instance_variable_set(:@initialized, true)
      Object.const_set(:Rails, Module.new).instance_variable_set(:@application, app)
      wait_for_the_end
    end
    assert_equal %w[rails rails], gc.values_at(:ended_by, :boot_end_by)
  end

  # A program whose last boot only exited ends this one where that one exited (not a signal:
  # the next boot's mark is where this one exits).
  def test_the_mark_ends_it
    gc = deferred(last_end: ->(now) { ["exit", now + 50_000] }) do
      kept = Array.new(100_000) { Object.new }
      wait_for_the_end
      kept.size
    end
    assert_equal ["allocated", nil], gc.values_at(:ended_by, :boot_end_by)
  end

  def test_a_fork_ends_it_in_the_parent_first
    gc = deferred do
      require_relative "../../lib/loadscan/core_ext/process"
      Loadscan::CoreExt::Fork.attach
      pid = fork { exit!(GC.enable ? 1 : 0) } # the child starts with GC on
      _, status = Process.wait2(pid)
      status.exitstatus
    end
    assert_equal [0, "fork"], gc.values_at(:value, :ended_by)
  end

  def test_a_second_ractor_ends_it_and_one_running_before_keeps_it_off
    skip "no Ractor.new" unless defined?(Ractor.new)
    gc = deferred do
      Warning[:experimental] = false
      Ractor.new { 1 }.then { |r| r.respond_to?(:value) ? r.value : r.take }
    end
    assert_equal [1, "ractor"], gc.values_at(:value, :ended_by)

    gc = deferred(before: -> { Warning[:experimental] = false; Ractor.new { Ractor.receive } }) { BootGC.deferring? }
    assert_equal [false, false, "Ractors running"], gc.values_at(:value, :deferred, :not_deferred)
  end

  def test_the_cap_ends_it
    gc = deferred(constants: { CAP: 0 }) { wait_for_the_end }
    assert_equal ["cap", nil], gc.values_at(:ended_by, :boot_end_by)
  end

  def test_the_time_limit_ends_it
    # Read at every tick: changed after the start, as bench/ does.
    gc = deferred { set(:MAX_SECONDS, 0.0) && wait_for_the_end }
    assert_equal "time", gc[:ended_by]
  end

  def test_stress_ends_it
    gc = deferred do
      GC.stress = true
      GC.stress = false
    end
    assert_equal "stress", gc[:ended_by]
  end

  # The end at exit is the next boot's end, even after the deferral ended another way.
  def test_exit_is_the_next_boots_end
    gc = deferred { BootGC.finish(:exit) }
    assert_equal [true, "exit", "exit"], gc.values_at(:value, :ended_by, :boot_end_by)

    gc = deferred(constants: { CAP: 0 }) { wait_for_the_end && BootGC.finish(:exit) }
    assert_equal [false, "cap", "exit"], gc.values_at(:value, :ended_by, :boot_end_by)
  end

  # BUDGET allocated since the last GC: one full GC, and the deferral goes on.
  def test_the_budget_runs_a_gc_and_goes_on
    gc = deferred(constants: { BUDGET: 4 << 20 }) do
      kept = Array.new(16) { "x" * (1 << 20) }
      sleep 0.005 until BootGC.figures[:budget_runs].positive? || !BootGC.deferring?
      [BootGC.deferring?, kept.size]
    end
    assert_equal [true, 16], gc[:value]
    assert_nil gc[:ended_by]
    assert_operator gc[:budget_runs], :>=, 1
  end

  # No budget run while the app has GC disabled; the cap still ends the deferral.
  def test_no_budget_run_while_the_app_has_gc_disabled
    gc = deferred(constants: { BUDGET: 1 << 20, CAP: 32 << 20 }) do
      GC.disable
      kept = Array.new(64) { "x" * (1 << 20) }
      wait_for_the_end
      [kept.size, GC.enable]
    end
    assert_equal [[64, true], "cap", 0], gc.values_at(:value, :ended_by, :budget_runs)
  end

  # GC.disable and GC.enable answer the app's own switch during the deferral, and GC is left as
  # the app last set it.
  def test_the_apps_switch_is_virtual_and_applied_at_the_end
    gc = deferred do
      answers = [GC.disable, GC.disable, GC.enable, GC.enable, GC.disable]
      ended = BootGC.finish(:booted)
      own = { disable: BootGC::DISABLE, enable: BootGC::ENABLE, "stress=": BootGC::STRESS }.map { |m, own| GC.singleton_class.instance_method(m) == own }
      answers + [ended, GC.enable, GC.enable] + own + [GC.singleton_class.private_method_defined?(:__loadscan_gc_disable) ||
                                                       GC.singleton_class.method_defined?(:__loadscan_gc_disable)]
    end
    # Off, off, on, on, off as the app set it; at the end GC is off (Ruby's own GC.enable says
    # it was), then on; GC's own methods back, no alias left.
    assert_equal [false, true, true, false, false, true, true, false, true, true, true, false], gc[:value]

    gc = deferred do
      [GC.disable, GC.enable, BootGC.finish(:booted), GC.disable, GC.enable]
    end
    assert_equal [false, true, true, false, true], gc[:value]
  end

  def test_an_app_that_disabled_gc_first_is_not_deferred
    gc = deferred(before: -> { GC.disable }) { GC.enable }
    assert_equal [true, false, "app disabled GC"], gc.values_at(:value, :deferred, :not_deferred)
  end

  private

  # In a fork: BootGC started (LOADSCAN_GC=on; `before` run first, `constants` of BootGC set
  # first, `last_end` given GC's allocated objects now), the block run; its figures with the
  # block's value under :value.
  def deferred(constants: {}, before: nil, last_end: nil, &block)
    skip "GC is deferred on Ruby 3.4 and later on Linux only" unless BootGC.supported?
    in_fork do
      constants.each { |name, value| set(name, value) }
      before&.call
      BootGC.start(mode: true, last_end: last_end&.call(GC.stat(:total_allocated_objects)))
      value = block.call
      BootGC.figures.merge(value: value)
    end
  end

  def set(name, value)
    BootGC.send(:remove_const, name)
    BootGC.const_set(name, value)
  end

  # Until the tick ends the deferral (it ends by MAX_SECONDS at the latest).
  def wait_for_the_end
    sleep 0.005 while BootGC.deferring?
    true
  end
end
