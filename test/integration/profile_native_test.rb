# frozen_string_literal: true

require_relative "../test_helper"

# The boot profile's file as the extension writes it (Native.speedscope, the exit of a profiled
# boot) against Ruby's writer (Speedscope.document and JSON.generate, for a process without the
# extension): on a real profiled run whose features have odd names, the same bytes; and where
# the extension cannot read the entries, Ruby's writer, with nothing lost.
class ProfileNativeTest < Minitest::Test
  SPEEDSCOPE = File.join(Loadscan::TestSupport::LIB, "loadscan/profile/speedscope")
  # Names that JSON escapes, or that are not ASCII.
  ODD = ["q\"uote", "back\\slash", "tab\tname", "new\nline", "ctl\u0001x", "ünïcödé", "sep\u2028arator"].freeze

  def test_the_extensions_document_is_rubys_byte_for_byte
    with_files(ODD.map { |name| ["lib/#{name}.rb", "$odd = (($odd || 0) + 1)\n"] } + [["lib/outer.rb", "#{ODD.map { |n| "require #{n.inspect}" }.join("\n")}\n"]]) do |dir|
      run = run_ruby!(<<~RUBY, loadscan: true)
        require #{SPEEDSCOPE.inspect}
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        tree = Loadscan.profile { require "outer"; load #{File.join(dir, "lib", "#{ODD.first}.rb").inspect} }
        native = Loadscan::Native.speedscope(tree.entries, tree.name.to_s, "loadscan \#{Loadscan::VERSION}")
        rendered = Loadscan::Profile::Speedscope.render(tree)
        json_loaded = defined?(::JSON) ? "json" : nil
        require "json"
        report("native" => native, "rendered" => rendered, "json_loaded" => json_loaded,
               "ruby" => JSON.generate(Loadscan::Profile::Speedscope.document(tree)),
               "labels" => tree.entries.map(&:label), "odd" => $odd)
      RUBY
      r = run.report
      assert_equal ODD.size + 1, r["odd"], "every odd file ran (and one twice)"
      ODD.each { |name| assert_includes r["labels"], name }
      assert_equal r["ruby"], r["native"]
      assert_equal Encoding::UTF_8, r["native"].encoding
      assert_equal r["native"], r["rendered"], "render takes the extension's"
      assert_nil r["json_loaded"], "writing the profile loaded no json"
    end
  end

  # A member the extension does not read as it is (a label that is a Symbol: `to_str` would run
  # Ruby code while it holds the strings) raises TypeError; entries of another layout (a
  # `loadscan profile` of another version than the app's extension) ArgumentError; render then
  # writes with Ruby's writer, the same entries.
  def test_entries_the_extension_cannot_read_go_to_rubys_writer
    with_files([["lib/plain.rb", ""]]) do |dir|
      run = run_ruby!(<<~RUBY, loadscan: true)
        require "json"
        require #{SPEEDSCOPE.inspect}
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        tree = Loadscan.profile { require "plain" }
        errors = {}
        odd_label = tree.entries.map(&:dup).tap { |es| es[1].label = :plain }
        Other = Struct.new(:id, :parent, :kind, :name, :file, :gem, :start, :wall, :cpu, :allocated, :gc)
        other = tree.entries.map { |e| Other.new(*e.to_a.first(11)) }
        unordered = tree.entries.rotate
        { "label" => odd_label, "layout" => other, "order" => unordered, "not a struct" => tree.entries.map(&:to_a) }.each do |what, entries|
          Loadscan::Native.speedscope(entries, "x", "y")
        rescue => e
          errors[what] = [e.class.name, e.message]
        end
        odd_tree = Loadscan::Profile::Tree.new("odd", entries: odd_label)
        report("errors" => errors, "render" => Loadscan::Profile::Speedscope.render(odd_tree),
               "ruby" => JSON.generate(Loadscan::Profile::Speedscope.document(odd_tree)))
      RUBY
      r = run.report
      assert_equal ["TypeError", "not Profile::Tree entries: a label of another type"], r["errors"]["label"]
      assert_equal "ArgumentError", r["errors"]["layout"][0]
      assert_match(/members .*"name"/, r["errors"]["layout"][1])
      assert_equal ["ArgumentError", "not Profile::Tree entries: entries are not in the order of their ids"], r["errors"]["order"]
      assert_equal ["ArgumentError", "not Profile::Tree entries: an entry is not a Struct"], r["errors"]["not a struct"]
      assert_equal r["ruby"], r["render"]
      assert_equal "plain", JSON.parse(r["render"])["shared"]["frames"][1]["name"][/\A\w+/], "the Symbol label as Ruby writes it"
    end
  end

  # Without the extension (a process that loaded only the profile's Ruby), render writes with
  # Ruby's writer.
  def test_without_the_extension_ruby_writes_it
    run = run_ruby!(<<~RUBY, loadscan: false)
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/version").inspect}
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/profile/tree").inspect}
      require #{SPEEDSCOPE.inspect}
      entry = Loadscan::Profile::Tree::Entry
      entries = [entry.new(0, nil, :boot, "boot", nil, "(outside any require)", 0.0, 2.0, 1.0, 10, 0.0),
                 entry.new(1, 0, :require, "a\\tb", "/x/a.rb", "app", 0.5, 1.0, 0.5, 4, 0.25)]
      tree = Loadscan::Profile::Tree.new("boot", entries: entries)
      report("native" => defined?(Loadscan::Native), "render" => Loadscan::Profile::Speedscope.render(tree))
    RUBY
    r = run.report
    assert_nil r["native"]
    doc = JSON.parse(r["render"])
    assert_equal ["boot", "a\tb [app]"], doc["shared"]["frames"].map { |f| f["name"] }
    assert_equal [0, 500, 1500, 2000], doc["profiles"][0]["events"].map { |e| e["at"] }
  end
end
