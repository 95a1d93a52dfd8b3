# frozen_string_literal: true

require_relative "../test_helper"

# Loadscan.instrumentation and ActiveSupport::Notifications hear the cache events; a hook that
# raises is one warning, never a broken boot.
class InstrumentationTest < Minitest::Test
  LIB = Loadscan::TestSupport::LIB

  def run_code(code, cache)
    run_ruby(<<~RUBY, loadscan: false, env: { "LOADSCAN_CACHE_DIR" => cache })
      require #{File.join(LIB, "loadscan").inspect}
      #{code}
    RUBY
  end

  def test_cache_events_reach_the_hook_and_active_support
    Dir.mktmpdir("loadscan-cache") do |cache|
      code = <<~RUBY
        events = []
        Loadscan.instrumentation = ->(event, payload) { events << [event, payload] if event.start_with?("cache_") }
        Loadscan.setup
        require "set"
        Loadscan.save
        Loadscan.save # nothing changed since
        notified = []
        begin
          require "active_support/notifications"
          ActiveSupport::Notifications.subscribe(/loadscan/) { |name, *| notified << name }
        rescue LoadError
          notified = nil # not installed for this Ruby
        end
        Loadscan.save
        report("events" => events.map { |e, p| [e, p[:result] || p[:roots_scanned].class.name, p[:cache_dir]] },
               "notified" => notified)
      RUBY
      run = run_code(code, cache)
      assert run.status.success?, run.stderr
      events = run.report["events"]
      assert_equal [[:cache_load, "Integer", cache], [:cache_write, :written, cache], [:cache_write, :clean, cache]],
                   events.first(3)
      assert_equal :cache_write, events[3][0] # after active_support: written or clean
      assert_equal 4, events.size
      assert_equal ["cache_write.loadscan"], run.report["notified"] unless run.report["notified"].nil?
      assert_empty run.stderr
    end
  end

  # Each require left to Ruby's own is an event with the feature and why; requires the index
  # answered are not.
  def test_requires_left_to_ruby_are_events
    with_files([["e/a.rb", ""], ["e/node_modules/n.rb", ""], ["e/p.rb", ""], ["e/rel.rb", ""]]) do |dir|
      run = run_code(<<~RUBY, File.join(dir, "cache"))
        $LOAD_PATH.unshift(#{"#{dir}/e".inspect})
        events = []
        Loadscan.instrumentation = ->(event, payload) { events << [event, payload] if event == :require_left_to_ruby }
        Loadscan.setup
        require "a"
        require "node_modules/n"
        require #{"#{dir}/e/p".inspect}
        Dir.chdir(#{dir.inspect}) { require "./e/rel" }
        report(events)
      RUBY
      assert run.success?, run.stderr
      assert_equal [[:require_left_to_ruby, { feature: "node_modules/n", reason: :blind_spot }],
                    [:require_left_to_ruby, { feature: "#{dir}/e/p", reason: :not_feature }],
                    [:require_left_to_ruby, { feature: "./e/rel", reason: :not_feature }]], run.report
    end
  end

  # A $LOAD_PATH change after setup that makes loadscan list entries is one :rescan event, at the
  # next require; the first scan is :cache_load's, and a change to entries already known none.
  def test_rescans_are_events
    with_files([["e/a.rb", ""], ["f/b.rb", ""], ["g/c.rb", ""]]) do |dir|
      run = run_code(<<~RUBY, File.join(dir, "cache"))
        $LOAD_PATH.unshift(#{"#{dir}/e".inspect})
        events = []
        Loadscan.instrumentation = ->(event, payload) { events << [event, payload] if %i[rescan cache_load].include?(event) }
        Loadscan.setup
        require "a"
        $LOAD_PATH.unshift(#{"#{dir}/f".inspect}, #{"#{dir}/g".inspect})
        require "b"
        require "c"
        $LOAD_PATH.push($LOAD_PATH.shift) # reordered, nothing new
        require "set"
        report(events.map { |e, p| [e, p[:roots_scanned], p[:roots_refreshed], p[:ms].class] })
      RUBY
      assert run.success?, run.stderr
      assert_equal :cache_load, run.report[0][0]
      assert_equal [[:rescan, 2, 0, Float]], run.report[1..]
    end
  end

  def test_a_hook_that_raises_is_one_warning
    assert_hook_failure_is_one_warning('raise "boom"', "RuntimeError (boom)")
  end

  # A LoadError is no StandardError: a hook (or ActiveSupport::Notifications loading a file of its
  # own, as on 3.4 when mutex_m is not in the Gemfile) that fails to load something at setup, at a
  # save or in the save at exit is still one warning, never a failed process.
  def test_a_hook_that_fails_to_load_a_file_is_one_warning
    assert_hook_failure_is_one_warning('require "loadscan_test_no_such_file"',
                                       "LoadError (cannot load such file -- loadscan_test_no_such_file)")
  end

  # A hook whose body is `hook` fails on every event (setup, save, the save at exit): the boot
  # goes on, and `raised` (its class and message) is warned about once.
  def assert_hook_failure_is_one_warning(hook, raised)
    Dir.mktmpdir("loadscan-cache") do |cache|
      run = run_code(<<~RUBY, cache)
        Loadscan.instrumentation = ->(*) { #{hook} }
        Loadscan.setup
        require "set"
        Loadscan.save
        report(defined?(Set) && Loadscan.active?)
      RUBY
      assert run.status.success?, run.stderr
      assert run.report
      assert_equal 1, run.stderr.lines.grep(/loadscan: an instrumentation hook on cache_load raised #{Regexp.escape(raised)}; ignored/).size, run.stderr
    end
  end
end
