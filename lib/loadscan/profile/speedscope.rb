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
    #   "loadscan": { "version": 2, "name": "bin/rails runner nil",
    #                 "kind": ["boot", "startup", "require", …, "call", …], "gem": ["(outside any require)", "(ruby start)", "json", …],
    #                 "cpu": [1225111, 539776, 1307, …], "allocated": [344224, 216699, 219, …], "gc": [130510, 67653, 0, …],
    #                 "samples": 2870 }
    #
    # (`samples`: how many stack samples the profile took, absent when it took none; a `call`
    # is a method of another gem an entry ran, Profile::Samples.)
    # `cpu` and `gc` in microseconds, and like `allocated` each entry's with its entries'. An
    # entry's parent is the entry open around it, its start and wall time its events', its file
    # its frame's, its label its frame's name less ` [gem]`; its own (self) figures are its less
    # its entries'. Whole numbers throughout: JSON writes them far faster than fractions.
    # `Tree.from_speedscope` reads it back (`loadscan profile`); the HTML page holds the same.
    #
    # Written in one place, the extension (ext/loadscan-profile: in one pass, with no Hash per
    # event and no `json` to load at exit); read here and by the page's script. A process
    # without the extension (not built) writes no file: the profile says so and prints its
    # summary.
    module Speedscope
      SCHEMA = "https://www.speedscope.app/file-format-schema.json"
      VERSION = 2

      # The extension could not write the tree (not loaded, of another version, or entries of
      # another layout).
      class Unwritable < StandardError; end

      module_function

      # `tree` as speedscope's JSON, by the extension.
      def render(tree)
        native = defined?(::Loadscan::Native) && ::Loadscan::Native
        unless native.respond_to?(:speedscope) && native.const_defined?(:SPEEDSCOPE_VERSION, false) &&
               native::SPEEDSCOPE_VERSION == VERSION
          why = native.respond_to?(:load_error) && native.load_error ? native.load_error.message : "no extension of this version loaded"
          raise Unwritable, "the profile's file is written by loadscan's extension: #{why}"
        end

        native.speedscope(tree.entries, tree.name.to_s, "loadscan #{Loadscan::VERSION}", tree.samples)
      rescue ArgumentError, TypeError, RangeError => e
        raise Unwritable, e.message
      end

      # The entries of a document `render` wrote (parsed JSON), as `Tree::Entry`s: inclusive
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
