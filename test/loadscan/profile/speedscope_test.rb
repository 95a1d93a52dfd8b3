# frozen_string_literal: true

require_relative "../../test_helper"
require_relative "../../../lib/loadscan/version"
require_relative "../../../lib/loadscan/profile"
require_relative "../../../lib/loadscan/profile/tree"
require_relative "../../../lib/loadscan/profile/speedscope"
require_relative "../../../lib/loadscan/native"
require "json"

# Profile::Speedscope in process: the document the extension writes of a Tree (its one
# writer) and the entries read back from it.
class ProfileSpeedscopeTest < Minitest::Test
  MS = 1_000_000

  def node(kind, label, file, parent, from, to, gc = 0)
    [kind, label, file, parent, (from * MS).to_i, from * MS / 2, (from * 1000).to_i, 0, nil, (to * MS).to_i, to * MS / 2, (to * 1000).to_i, gc * MS]
  end

  def tree
    nodes = [node(:boot, "ruby -e 1", nil, nil, 0, 10, 1),
             node(:require, "json", "/g/gems/json-2.7/lib/json.rb", 0, 1, 5),
             node(:require, "json/common", "/g/gems/json-2.7/lib/json/common.rb", 1, 1.5, 2.5),
             node(:require, "json", "/g/gems/json-2.7/lib/json.rb", 0, 6, 6.002),
             node(:load, "json", "/h/json.rb", 0, 7, 8)]
    frames = [["JSON.dump", "/g/gems/json-2.7/lib/json/common.rb"]]
    samples = [[7.5 * MS, 7.5 * MS / 2, 52, 0, 1, 0]]
    Loadscan::Profile::Tree.new("ruby -e 1", nodes, samples: [samples.flatten.map(&:to_i), frames])
  end

  def setup
    assert Loadscan::Native.available?, "the extension for this Ruby (bin/test builds it): #{Loadscan::Native.load_error&.message}"
  end

  def document(tree) = JSON.parse(Loadscan::Profile::Speedscope.render(tree))

  def test_events_nest_as_the_entries_and_frames_are_shared_by_name_and_file
    doc = document(tree)
    names = doc["shared"]["frames"].map { |f| [f["name"], f["file"]] }
    assert_equal [["ruby -e 1", nil], ["json [json]", "/g/gems/json-2.7/lib/json.rb"], ["json/common [json]", "/g/gems/json-2.7/lib/json/common.rb"],
                  ["json [(other)]", "/h/json.rb"], ["JSON.dump [json]", "/g/gems/json-2.7/lib/json/common.rb"]], names
    events = doc["profiles"][0]["events"].map { |e| [e["type"], e["frame"], e["at"]] }
    assert_equal [["O", 0, 0], ["O", 1, 1000], ["O", 2, 1500], ["C", 2, 2500], ["C", 1, 5000], ["O", 1, 6000], ["C", 1, 6002],
                  ["O", 3, 7000], ["O", 4, 7000], ["C", 4, 8000], ["C", 3, 8000], ["C", 0, 10_000]], events
    assert_equal %w[boot require require require load call], doc["loadscan"]["kind"]
    assert_equal 1000, doc["loadscan"]["gc"][0]
    assert_equal 1, doc["loadscan"]["samples"]
    refute_includes Loadscan::Profile::Speedscope.render(Loadscan::Profile::Tree.new("x", [node(:boot, "x", nil, nil, 0, 1)])), "samples"
  end

  def test_entries_read_back_as_written
    written = tree
    read = Loadscan::Profile::Speedscope.entries(document(written))
    assert_equal written.entries.map { |e| [e.id, e.parent, e.kind, e.label, e.file, e.gem, e.allocated, e.self_allocated, e.children] },
                 read.map { |e| [e.id, e.parent, e.kind, e.label, e.file, e.gem, e.allocated, e.self_allocated, e.children] }
    written.entries.zip(read).each do |w, r|
      %i[start wall cpu gc self_wall self_cpu self_gc].each { |k| assert_in_delta w[k], r[k], 0.0015, "#{w.label}: #{k}" }
    end
  end

  def test_another_version_is_refused
    doc = document(tree)
    doc["loadscan"]["version"] = Loadscan::Profile::Speedscope::VERSION + 1
    assert_raises(ArgumentError) { Loadscan::Profile::Speedscope.entries(doc) }
  end
end
