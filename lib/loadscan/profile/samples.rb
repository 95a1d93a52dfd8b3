# frozen_string_literal: true

module Loadscan
  class Profile
    # What the sampler saw (Profile::Sampler; ext/loadscan/src/sampler.rs) turned into entries of
    # kind :call: the time an entry spent in code of other gems, not in an entry of its own (a
    # nested require, an initializer), named for the method it ran: `TZInfo.eager_load!
    # [tzinfo]` under the initializer that called it. Tree#build calls `gap` for each stretch of
    # an entry's own time (from its start or an entry's end to the next entry's start or its
    # own end), in time order.
    #
    # Each sample names the frames above the hook of the entry open then (innermost first). Of
    # those, the entry's own code is the frames of its file and what they call in the same gem;
    # a frame of another gem starts a call, and inside it a frame of yet another gem a call
    # under it (four deep at most), each named for its outermost frame there. A stretch's time
    # goes to its samples: from the stretch's start to the first sample to the first's calls,
    # from one sample to the next to the next's, from the last to the stretch's end to the
    # last's; consecutive samples of the same calls make one entry. Clocks at each end are read
    # as the sample was taken (wall, CPU, objects allocated, GC time), so every figure of a call
    # is measured, not estimated; only where the line falls between two samples is.
    #
    #   samples: [wall_ns, cpu_ns, allocated, gc_ns, n, frame × n, …]   frames: [[label, path], …]
    class Samples
      # Calls nested at most this deep under one entry.
      DEPTH = 4
      NONE = [].freeze

      # `data`: `[samples, frames]` as Native.stop_sampler gives them; `gems`: Tree::GemDirs.
      def initialize(data, gems)
        flat, frames = data
        @frames = frames.map { |label, path| [utf8(label), path.is_a?(String) ? utf8(path) : nil] }
        @gems = gems
        @gem_of = {}
        @at = [] # each sample's offset in `flat`
        i = 0
        while i + 5 <= flat.size
          @at << i
          i += 5 + flat[i + 4]
        end
        @flat = flat
        @next = 0
        @count = @at.size
      end

      attr_reader :count

      # The stretch of `entry`'s own time from `from` to `to` (readings `[wall_ns, cpu_ns,
      # allocated, gc_ns]`): its samples' calls as entries, added to `list` under `entry`
      # (times from `origin`, ns).
      def gap(entry, from, to, list, origin)
        first = @next
        @next += 1 while @next < @count && @flat[@at[@next]] < to[0]
        return if @next == first || entry.kind == :boot || entry.kind == :startup

        open = [] # [frame, entry, start readings]
        mark = from
        (first...@next).each do |s|
          at = @at[s]
          # the time up to this sample (from the stretch's start for the first) is this sample's
          move(open, key(@flat[at + 5, @flat[at + 4]], entry), mark, entry, list, origin)
          mark = @flat[at, 4]
        end
        # the rest of the stretch, the last sample's
        close(open, 0, to)
      end

      private

      def move(open, key, reading, parent, list, origin)
        same = 0
        same += 1 while same < open.size && same < key.size && open[same][0] == key[same]
        close(open, same, reading)
        key.drop(same).each do |frame|
          label, path = @frames[frame]
          under = open.empty? ? parent : open.last[1]
          e = Tree::Entry.new(list.size, under.id, :call, label, path, gem_of(frame), (reading[0] - origin) / 1_000_000.0,
                              0.0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, [])
          under.children << e.id
          list << e
          open << [frame, e, reading, under]
        end
      end

      # Closes the calls open from depth `depth` on, at `reading`.
      def close(open, depth, reading)
        while open.size > depth
          _, e, from, under = open.pop
          e.wall = (reading[0] - from[0]) / 1_000_000.0
          e.cpu = [(reading[1] - from[1]) / 1_000_000.0, 0.0].max
          e.allocated = [reading[2] - from[2], 0].max
          e.gc = [(reading[3] - from[3]) / 1_000_000.0, 0.0].max
          e.self_wall += e.wall
          e.self_cpu += e.cpu
          e.self_allocated += e.allocated
          e.self_gc += e.gc
          under.self_wall -= e.wall
          under.self_cpu -= e.cpu
          under.self_allocated -= e.allocated
          under.self_gc -= e.gc
        end
      end

      # The calls a sample's frames (innermost first) name under `entry`, outermost first.
      def key(frames, entry)
        own = entry.file && frames.rindex { |f| @frames[f][1] == entry.file }
        frames = frames.first(own) if own
        gem = entry.gem
        key = nil
        frames.reverse_each do |f|
          g = gem_of(f) or next
          next if g == gem

          (key ||= []) << f
          gem = g
          break if key.size == DEPTH
        end
        key || NONE
      end

      def utf8(value)
        s = value.to_s.dup.force_encoding(Encoding::UTF_8)
        s.valid_encoding? ? s : s.scrub
      end

      # A frame's gem; nil for one with no file (`<internal:…>`, eval'd code).
      def gem_of(frame)
        @gem_of.fetch(frame) do
          path = @frames[frame][1]
          @gem_of[frame] = path.is_a?(String) && path.start_with?("/") ? (@gems.of(path) || "(other)") : nil
        end
      end
    end
  end
end
