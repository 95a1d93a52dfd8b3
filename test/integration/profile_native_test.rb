# frozen_string_literal: true

require_relative "../test_helper"

# The boot profile's file, written in one place (the extension: Native.speedscope, from
# ext/loadscan-profile) and read by Speedscope.entries: on a real profiled run whose features have
# odd names, every entry read back as it was; entries the extension cannot read, or a process
# without it, write no file and say why.
class ProfileNativeTest < Minitest::Test
  SPEEDSCOPE = File.join(Loadscan::TestSupport::LIB, "loadscan/profile/speedscope")
  # Names that JSON escapes, or that are not ASCII.
  ODD = ["q\"uote", "back\\slash", "tab\tname", "new\nline", "ctl\u0001x", "ünïcödé", "sep\u2028arator"].freeze

  def test_the_extensions_document_reads_back_as_the_tree
    with_files(ODD.map { |name| ["lib/#{name}.rb", "$odd = (($odd || 0) + 1)\n"] } + [["lib/outer.rb", "#{ODD.map { |n| "require #{n.inspect}" }.join("\n")}\n"]]) do |dir|
      run = run_ruby!(<<~RUBY, loadscan: true)
        require #{SPEEDSCOPE.inspect}
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        tree = Loadscan.profile { require "outer"; load #{File.join(dir, "lib", "#{ODD.first}.rb").inspect} }
        rendered = Loadscan::Profile::Speedscope.render(tree)
        json_loaded = defined?(::JSON) ? "json" : nil
        require "json"
        back = Loadscan::Profile::Speedscope.entries(JSON.parse(rendered))
        fields = ->(e) { [e.id, e.parent, e.kind.to_s, e.label, e.file, e.gem, e.allocated, e.children] }
        report("rendered" => rendered, "json_loaded" => json_loaded, "odd" => $odd, "labels" => tree.entries.map(&:label),
               "tree" => tree.entries.map(&fields), "back" => back.map(&fields))
      RUBY
      r = run.report
      assert_equal ODD.size + 1, r["odd"], "every odd file ran (and one twice)"
      ODD.each { |name| assert_includes r["labels"], name }
      assert_equal r["tree"], r["back"]
      assert_nil r["json_loaded"], "writing the profile loaded no json"
    end
  end

  # A member the extension does not read as it is (a label that is a Symbol: `to_str` would run
  # Ruby code while it holds the strings) raises TypeError; entries of another layout (a
  # `loadscan profile` of another version than the app's extension) ArgumentError; render says
  # the file cannot be written (Speedscope::Unwritable), and LOADSCAN_PROFILE warns and prints
  # the summary.
  def test_entries_the_extension_cannot_read_are_not_written
    with_files([["lib/plain.rb", ""]]) do |dir|
      run = run_ruby!(<<~RUBY, loadscan: true)
        require #{SPEEDSCOPE.inspect}
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        tree = Loadscan.profile { require "plain" }
        errors = {}
        odd_label = tree.entries.map(&:dup).tap { |es| es[1].label = :plain }
        Other = Struct.new(:id, :parent, :kind, :name, :file, :gem, :start, :wall, :cpu, :allocated, :gc)
        other = tree.entries.map { |e| Other.new(*e.to_a.first(11)) }
        unordered = tree.entries.rotate
        { "label" => odd_label, "layout" => other, "order" => unordered, "not a struct" => tree.entries.map(&:to_a) }.each do |what, entries|
          Loadscan::Native.speedscope(entries, "x", "y", nil)
        rescue => e
          errors[what] = [e.class.name, e.message]
        end
        render = begin
          Loadscan::Profile::Speedscope.render(Loadscan::Profile::Tree.new("odd", entries: odd_label))
        rescue Loadscan::Profile::Speedscope::Unwritable => e
          e.message
        end
        report("errors" => errors, "render" => render)
      RUBY
      r = run.report
      assert_equal ["TypeError", "not Profile::Tree entries: a label of another type"], r["errors"]["label"]
      assert_equal "ArgumentError", r["errors"]["layout"][0]
      assert_match(/members .*"name"/, r["errors"]["layout"][1])
      assert_equal ["ArgumentError", "not Profile::Tree entries: entries are not in the order of their ids"], r["errors"]["order"]
      assert_equal ["ArgumentError", "not Profile::Tree entries: an entry is not a Struct"], r["errors"]["not a struct"]
      assert_equal "not Profile::Tree entries: a label of another type", r["render"]
    end
  end

  # Without the extension (a process that loaded only the profile's Ruby), nothing is written:
  # render says why.
  def test_without_the_extension_nothing_is_written
    run = run_ruby!(<<~RUBY, loadscan: false)
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/version").inspect}
      require #{File.join(Loadscan::TestSupport::LIB, "loadscan/profile/tree").inspect}
      require #{SPEEDSCOPE.inspect}
      entry = Loadscan::Profile::Tree::Entry
      entries = [entry.new(0, nil, :boot, "boot", nil, "(outside any require)", 0.0, 2.0, 1.0, 10, 0.0)]
      message = begin
        Loadscan::Profile::Speedscope.render(Loadscan::Profile::Tree.new("boot", entries: entries))
      rescue Loadscan::Profile::Speedscope::Unwritable => e
        e.message
      end
      report("native" => defined?(Loadscan::Native), "message" => message)
    RUBY
    r = run.report
    assert_nil r["native"]
    assert_equal "the profile's file is written by loadscan's extension: no extension of this version loaded", r["message"]
  end
end
