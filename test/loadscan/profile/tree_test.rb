# frozen_string_literal: true

require_relative "../../test_helper"
require_relative "../../../lib/loadscan/version"
require_relative "../../../lib/loadscan/profile"
require_relative "../../../lib/loadscan/profile/tree"

# Profile::Tree from the recorder's nodes and the sampler's samples (Profile::Samples), in
# process: the self figures, the rankings without GC, and the :call entries the samples make.
class ProfileTreeTest < Minitest::Test
  MS = 1_000_000
  GEMS = "/x/gems"
  APP = "#{GEMS}/app-1.0/lib/app.rb".freeze
  INIT = "#{GEMS}/app-1.0/config/busy.rb".freeze
  BUSY = "#{GEMS}/busy-1.0/lib/busy.rb".freeze
  INNER = "#{GEMS}/inner-2.0/lib/inner.rb".freeze

  # A node as the recorder keeps it: times in ms here, the recorder's ns there; CPU = wall,
  # objects = 10 per ms, GC as given.
  def node(kind, label, file, parent, from, to, gc_from = 0, gc_to = 0)
    [kind, label, file, parent, from * MS, from * MS, from * 10, gc_from * MS, nil, to * MS, to * MS, to * 10, gc_to * MS]
  end

  # Samples' data: each [at ms, gc ms, frame ids innermost first], frames [[label, path]].
  def samples(list, frames)
    flat = list.flat_map { |at, gc, ids| [at * MS, at * MS, at * 10, gc * MS, ids.size, *ids] }
    [flat, frames]
  end

  def test_self_figures_add_up_and_rankings_leave_gc_beside
    nodes = [node(:boot, "boot", nil, nil, 0, 100),
             node(:require, "app", APP, 0, 10, 60, 0, 30),  # 50 ms, 30 of them GC
             node(:require, "busy", BUSY, 1, 20, 30),       # 10 ms, no GC
             node(:require, "inner", INNER, 0, 70, 90)]     # 20 ms, no GC
    tree = Loadscan::Profile::Tree.new("boot", nodes)
    app, busy, inner = tree.entries.values_at(1, 2, 3)
    assert_equal [nil, 0, 1, 0], tree.entries.map(&:parent)
    assert_in_delta 40.0, app.self_wall
    assert_in_delta 30.0, app.self_gc
    assert_in_delta 10.0, Loadscan::Profile::Tree.own(app)
    assert_in_delta 100.0, tree.entries.sum(&:self_wall), 1e-9, "self times add up to the boot's"
    assert_equal [inner, app, busy], tree.features, "by own time without GC: inner's 20 ms before app's 10 (40 with GC)"
    assert_equal [inner], tree.features(1)
    gems = tree.gems.to_h
    assert_in_delta 10.0, gems["app"]["self_ms"]
    assert_in_delta 30.0, gems["app"]["gc_ms"]
    assert_equal "(outside any require)", tree.gems.first.first, "the boot's 30 ms outside any require first"
  end

  # An initializer (here a load of INIT, gem app) that spends its time in Busy.work (gem busy),
  # which calls Inner#step (gem inner) now and then: calls under it, each stretch its sample's.
  def test_samples_make_calls_of_other_gems_methods
    frames = [["Busy.work", BUSY], ["block in <top (required)>", INIT], ["Inner#step", INNER], ["App.helper", APP], ["Kernel#tap", "<internal:kernel>"]]
    nodes = [node(:boot, "boot", nil, nil, 0, 200),
             node(:load, "config/busy.rb", INIT, 0, 10, 130, 0, 4),
             node(:require, "app", APP, 1, 110, 120, 3, 3)]
    list = [[15, 0, [1]]] +                                   # the initializer's own code
           (20..60).step(10).map { |t| [t, 0, [0, 4, 1]] } +  # Busy.work (through Kernel#tap: no file)
           [[70, 1, [2, 0, 1]], [80, 2, [2, 0, 1]]] +         # Inner#step, under Busy.work
           [[90, 2, [0, 1]], [100, 2, [3, 1]]] +              # Busy.work; App.helper (its own gem: the initializer's)
           [[112, 3, [3]], [125, 4, [0, 1]]]                  # one in app's require (its own gem), Busy.work again
    tree = Loadscan::Profile::Tree.new("boot", nodes, samples: samples(list, frames))
    assert_equal 12, tree.samples
    kinds = tree.entries.map { |e| [e.kind, e.label, e.parent] }
    assert_equal [[:boot, "boot", nil], [:load, "config/busy.rb", 0], [:call, "Busy.work", 1], [:call, "Inner#step", 2],
                  [:require, "app", 1], [:call, "Busy.work", 1]], kinds
    load, work, step, app, again = tree.entries.values_at(1, 2, 3, 4, 5)
    # Busy.work from the own sample at 15 to App.helper's at 100 (whose stretch from 90 is the initializer's);
    # Inner#step from the sample before its first (60) to its last (80).
    assert_in_delta 75.0, work.wall
    assert_equal "busy", work.gem
    assert_equal BUSY, work.file
    assert_in_delta 20.0, step.wall
    assert_in_delta 2.0, step.gc, 1e-9, "GC read at the samples: 0 at 60, 2 at 80"
    assert_in_delta 55.0, work.self_wall
    assert_in_delta 10.0, app.self_wall, 1e-9, "app's sample names no other gem: all its own"
    assert_in_delta 10.0, again.wall, 1e-9, "from app's end (120) to the load's end (130): the last sample's"
    assert_in_delta 120.0 - 75 - 10 - 10, load.self_wall, 1e-9, "the initializer's own: 10-15, 90-100 and 100-110 (App.helper)"
    assert_in_delta 200.0, tree.entries.sum(&:self_wall), 1e-9, "self times still add up"
    calls = tree.calls
    assert_equal ["Busy.work", "Inner#step"], calls.map { |c| c["label"] }
    assert_equal [2, "config/busy.rb"], calls.first.values_at("calls", "from")
    assert_in_delta 55.0 + 9, calls.first["self_ms"], 1e-9, "without GC: 1 ms of it in the second call"
    assert_equal "busy", tree.gems.find { |g, _| g == "busy" }&.first
  end

  def test_the_boot_keeps_its_own_time_and_a_profile_without_samples_has_no_calls
    frames = [["Busy.work", BUSY]]
    nodes = [node(:boot, "boot", nil, nil, 0, 50)]
    tree = Loadscan::Profile::Tree.new("boot", nodes, samples: samples([[10, 0, [0]], [20, 0, [0]]], frames))
    assert_equal [:boot], tree.entries.map(&:kind), "what runs outside any entry is the boot's"
    assert_nil Loadscan::Profile::Tree.new("boot", nodes).samples
  end
end
