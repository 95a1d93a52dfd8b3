# frozen_string_literal: true

module Loadscan
  class Profile
    # The profile in speedscope's file format (https://www.speedscope.app/file-format-schema.json),
    # one evented profile: an open event and a close event per entry, times in microseconds from
    # the boot's start, frames named `label [gem]` (the boot's: its label) with their file.
    # speedscope (and the viewers that read its format) open it as is. The entries are there
    # once: what speedscope's format has no place for is under `"loadscan"` (the schema allows
    # more keys), one array per figure, an element per entry in the order of their open events:
    #
    #   "loadscan": { "version": 1, "name": "bin/rails runner nil",
    #                 "kind": ["boot", "startup", "require", …], "gem": ["(outside any require)", "(ruby start)", "json", …],
    #                 "cpu": [1225111, 539776, 1307, …], "allocated": [344224, 216699, 219, …], "gc": [130510, 67653, 0, …] }
    #
    # `cpu` and `gc` in microseconds, and like `allocated` each entry's with its entries'. An
    # entry's parent is the entry open around it, its start and wall time its events', its file
    # its frame's, its label its frame's name less ` [gem]`; its own (self) figures are its less
    # its entries'. Whole numbers throughout: JSON writes them far faster than fractions.
    # `Tree.from_speedscope` reads it back (`loadscan profile`); the HTML page holds the same.
    #
    # Written by the extension (ext/loadscan-core/src/profile.rs) where the process has loaded it
    # (a boot loadscan set up): the same document in one pass, with no Hash per event and no
    # `json` to load at exit. Else (a boot without loadscan, or with another version of it) by
    # `document` and JSON.generate.
    module Speedscope
      SCHEMA = "https://www.speedscope.app/file-format-schema.json"
      VERSION = 1

      module_function

      def render(tree)
        native(tree) || begin
          require "json"
          JSON.generate(document(tree))
        end
      end

      # The extension's document, or nil: no extension loaded, one of another format, or entries
      # it cannot read (a Tree of another version of loadscan than the extension's).
      def native(tree)
        native = defined?(::Loadscan::Native) && ::Loadscan::Native
        return unless native.respond_to?(:speedscope) && native.const_defined?(:SPEEDSCOPE_VERSION, false) &&
                      native::SPEEDSCOPE_VERSION == VERSION

        native.speedscope(tree.entries, tree.name.to_s, "loadscan #{Loadscan::VERSION}")
      rescue ArgumentError, TypeError, RangeError
        nil
      end

      def document(tree)
        entries = tree.entries
        n = entries.size
        frames = []
        frame_of = {} # name => frame (a name seen with another file: a frame of its own)
        events = []
        kinds = Array.new(n)
        gems = Array.new(n)
        cpu = Array.new(n)
        allocated = Array.new(n)
        gc = Array.new(n)
        open_ids = [] # the entries open now, innermost last; their close events
        open_closes = []
        entries.each do |e|
          id = e.id
          parent = e.parent
          while (top = open_ids.last) && top != parent
            open_ids.pop
            events << open_closes.pop
          end
          kind = e.kind
          gem = e.gem
          file = e.file
          name = kind == :boot ? e.label : "#{e.label} [#{gem}]"
          frame = frame_of[name]
          unless frame && frames[frame]["file"] == file
            frame = frame_of[name] = frames.size
            frames << (file ? { "name" => name, "file" => file } : { "name" => name })
          end
          start = e.start * 1000
          events << { "type" => "O", "frame" => frame, "at" => start.round }
          open_ids << id
          # (its end never past its parent's: the clocks are read one after the other)
          open_closes << { "type" => "C", "frame" => frame, "at" => (start + e.wall * 1000).round }
          kinds[id] = kind.name
          gems[id] = gem
          cpu[id] = (e.cpu * 1000).round
          allocated[id] = e.allocated
          gc[id] = (e.gc * 1000).round
        end
        events << open_closes.pop until open_closes.empty?
        { "$schema" => SCHEMA, "shared" => { "frames" => frames },
          "profiles" => [{ "type" => "evented", "name" => tree.name, "unit" => "microseconds", "startValue" => 0,
                           "endValue" => (tree.total_ms * 1000).round, "events" => events }],
          "name" => "boot profile: #{tree.name}", "activeProfileIndex" => 0, "exporter" => "loadscan #{Loadscan::VERSION}",
          "loadscan" => { "version" => VERSION, "name" => tree.name, "kind" => kinds, "gem" => gems, "cpu" => cpu,
                          "allocated" => allocated, "gc" => gc } }
      end

      # The entries of a document `document` made (parsed JSON), as `Tree::Entry`s: inclusive
      # and self figures, children.
      def entries(doc)
        data = doc["loadscan"]
        unless data.is_a?(Hash) && data["version"] == VERSION
          raise ArgumentError, "not a loadscan profile of this version (#{data.is_a?(Hash) ? data["version"].inspect : "no \"loadscan\" key"})"
        end

        frames = doc.fetch("shared").fetch("frames")
        kinds, gems, cpu, allocated, gc = data.values_at("kind", "gem", "cpu", "allocated", "gc")
        # Pass 1, the events: each entry's frame, parent, start and end (µs).
        frame_ids = []
        parents = []
        starts = []
        ends = []
        open = []
        doc.fetch("profiles").first.fetch("events").each do |ev|
          if ev["type"] == "O"
            id = frame_ids.size
            frame_ids << ev["frame"]
            parents << open.last
            starts << ev["at"]
            open << id
          else
            ends[open.pop] = ev["at"]
          end
        end
        raise ArgumentError, "the profile's events leave #{open.size} entries open" unless open.empty?

        # Pass 2: the entries (parents before their entries), self figures less their entries'.
        list = Array.new(frame_ids.size)
        frame_ids.each_with_index do |frame_id, id|
          frame = frames[frame_id]
          kind = kinds[id].to_sym
          gem = gems[id]
          label = kind == :boot ? frame["name"] : frame["name"].delete_suffix(" [#{gem}]")
          wall = (ends[id] - starts[id]) / 1000.0
          c = cpu[id] / 1000.0
          g = gc[id] / 1000.0
          a = allocated[id]
          e = list[id] = Tree::Entry.new(id, parents[id], kind, label, frame["file"], gem, starts[id] / 1000.0, wall, c, a, g,
                                         wall, c, a, g, [])
          list[e.parent].adopt(e) if e.parent
        end
        list
      end
    end
  end
end
