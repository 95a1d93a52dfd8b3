# frozen_string_literal: true

require_relative "../test_helper"

# Issue 29, item 2. What loadscan runs in the middle of a `require` — the instrumentation
# events (`:require_left_to_ruby`, `:rescan`) and the scan warning (through `Warning.warn`) —
# may be where an interrupt arrives: a `Timeout`, `Thread#raise` from another thread,
# `Thread#kill`, SIGTERM's `SignalException`, a `throw`. Each must come out of the require as
# it comes out of stock Ruby's program at the same point (there, with no hook, right after the
# require). Every hook here waits in `pause` for its interrupt, once; stock Ruby pauses after
# the require instead. They were all swallowed: the require went on as if nothing had come.
class HookInterruptsTest < Minitest::Test
  CODE = <<~'RUBY'
    require "timeout"
    # Where the interrupt arrives: in loadscan's hook, or (stock Ruby, no hook) after the require.
    def pause
      $paused = true
      $ready << true
      $then ? $then.call : sleep(1)
    end
    def Warning.warn(message, **kw)
      message.start_with?("loadscan:") ? pause : super(message, **kw)
    end
    if defined?(Loadscan)
      Loadscan.instrumentation = lambda do |event, _payload|
        next unless event == $armed

        $armed = nil
        pause
      end
    end
    # Requires `feature` with `event`'s hook (nil: the scan warning) waiting for the interrupt
    # that `interrupt` (run in another thread once the hook waits) or `then_do` (run in the hook) sends.
    def attempt(event, feature, then_do: nil, &interrupt)
      $ready = Queue.new
      $armed, $paused, $then = event, false, then_do
      Thread.new($ready) { |ready| ready.pop; interrupt.call } if interrupt
      require feature
      pause unless $paused
      :finished
    end
    dir, = ARGV
    main = Thread.current
    out = {}
    out["timeout"] = begin
      Timeout.timeout(0.5) { attempt(:require_left_to_ruby, "#{dir}/a/by_path.rb") }
    rescue Timeout::Error => e
      e.class.name
    end
    out["thread_raise"] = begin
      attempt(:require_left_to_ruby, "#{dir}/a/raised.rb") { main.raise(IOError, "raised into the hook") }
    rescue IOError => e
      e.message
    end
    out["sigterm"] = begin
      attempt(:require_left_to_ruby, "#{dir}/a/termed.rb") { Process.kill(:TERM, Process.pid) }
    rescue SignalException => e
      e.message
    end
    out["throw"] = catch(:out) { attempt(:require_left_to_ruby, "#{dir}/a/thrown.rb", then_do: -> { throw :out, :thrown }) }
    killed = Thread.new do
      me = Thread.current
      $LOAD_PATH.push("#{dir}/c")
      attempt(:rescan, "in_new_entry") { me.kill }
      $survived = true
    end
    killed.join
    out["kill"] = [$survived, killed.status]
    $LOAD_PATH.unshift("#{dir}/e")
    out["warning_raise"] = begin
      attempt(nil, "a/x") { main.raise(IOError, "raised into Warning.warn") }
    rescue IOError => e
      e.message
    end
    out["after"] = require("c/after")
    report(out)
  RUBY

  def test_interrupts_in_hooks_reach_the_program_as_in_stock
    files = [%w[a/by_path.rb], %w[a/raised.rb], %w[a/termed.rb], %w[a/thrown.rb], %w[c/in_new_entry.rb], %w[c/c/after.rb],
             %w[e/a/x.rb]].map { |(path)| [path, ""] }
    with_files([*files, ["e/a/loop", :symlink, ".."]]) do |dir|
      env = { "LOADSCAN_LAZY" => "0" } # lists e/ whole: its loop is a problem, warned at the require
      stock, fast = assert_same_as_stock(CODE, args: [dir], env: env, timeout: 30)
      assert_equal({ "timeout" => "Timeout::Error", "thread_raise" => "raised into the hook", "sigterm" => "SIGTERM",
                     "throw" => :thrown, "kill" => [nil, false], "warning_raise" => "raised into Warning.warn",
                     "after" => true }, stock.report)
      assert_operator fast.stats[:hits], :>=, 1, "loadscan answered nothing after the interrupts"
    end
  end
end
