# frozen_string_literal: true

require "json"

module Loadscan
  class Profile
    # The profile in speedscope's file format (https://www.speedscope.app/file-format-schema.json),
    # one evented profile: an open event and a close event per entry, times in microseconds from
    # the boot's start (whole numbers: JSON writes them far faster than fractions), frames named `label [gem]` with their file. speedscope (and the viewers
    # that read its format) open it as is; loadscan keeps its own figures beside, under
    # `"loadscan"` (the schema allows more keys), for `loadscan profile` and the HTML page.
    module Speedscope
      SCHEMA = "https://www.speedscope.app/file-format-schema.json"

      module_function

      def render(tree)
        JSON.generate(document(tree))
      end

      def document(tree)
        frames = []
        frame_of = {}
        events = []
        closing = [] # [entry, frame] open now, innermost last
        tree.entries.each do |e|
          events << close_event(closing.pop) while closing.any? && closing.last.first.id != e.parent
          frame = (frame_of[e.label] ||= {})[e.file || e.gem] ||= (frames << frame_for(e)).size - 1
          events << { "type" => "O", "frame" => frame, "at" => (e.start * 1000).round }
          closing << [e, frame]
        end
        events << close_event(closing.pop) while closing.any?
        { "$schema" => SCHEMA, "shared" => { "frames" => frames },
          "profiles" => [{ "type" => "evented", "name" => tree.name, "unit" => "microseconds", "startValue" => 0,
                           "endValue" => (tree.total_ms * 1000).round, "events" => events }],
          "name" => "boot profile: #{tree.name}", "activeProfileIndex" => 0, "exporter" => "loadscan #{VERSION}",
          "loadscan" => tree.to_h }
      end

      def frame_for(entry)
        frame = { "name" => entry.kind == :boot ? entry.label : "#{entry.label} [#{entry.gem}]" }
        frame["file"] = entry.file if entry.file
        frame
      end

      # An entry's close is at its end, never past its parent's (clocks read one after the other).
      def close_event((entry, frame)) = { "type" => "C", "frame" => frame, "at" => ((entry.start + entry.wall) * 1000).round }

    end
  end
end
