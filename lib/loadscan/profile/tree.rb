# frozen_string_literal: true

require_relative "samples"

module Loadscan
  class Profile
    # A finished profile: its entries in the order they started (each after its parent), with
    # inclusive and self figures, and the gem each belongs to. The boot's own entry is the first;
    # its self time is the time outside any require, so the self times add up to the boot's.
    #
    #   tree.entries.first  # => #<Entry kind=:boot label="bin/rails runner nil" wall=1840.2 …>
    #   tree.gems.first     # => ["activesupport", { "self_ms" => 212.4, "allocated" => 1_220_114, … }]
    class Tree
      # Times in milliseconds from the boot's start; `self_*` what the entry did itself, the
      # others include its entries'.
      Entry = Struct.new(:id, :parent, :kind, :label, :file, :gem, :start, :wall, :cpu, :allocated, :gc,
                         :self_wall, :self_cpu, :self_allocated, :self_gc, :children) do
        # `entry` is one of this entry's: its figures are not this one's own.
        def adopt(entry)
          children << entry.id
          self.self_wall -= entry.wall
          self.self_cpu -= entry.cpu
          self.self_allocated -= entry.allocated
          self.self_gc -= entry.gc
        end
      end
      # Kinds of entry that load a file.
      LOADS = %i[require require_relative load].freeze
      # Kinds of entry that are a part of the boot: Bundler's (:phase) and Rails' initializers.
      PHASES = %i[phase initializer].freeze
      # The kind of entry for a method of another gem an entry ran (Profile::Samples).
      CALL = :call

      attr_reader :name, :entries

      # From the recorder's nodes (Profile) and what its sampler saw (`samples`, see Samples);
      # or, with `entries:`, from a file's (from_speedscope).
      def initialize(name, nodes = nil, samples: nil, entries: nil)
        @name = name
        @entries = entries || build(nodes, samples)
      end

      # How many stack samples the profile took (nil: none were taken).
      attr_accessor :samples

      # The tree of a profile written as speedscope's JSON (Profile::Speedscope), parsed.
      def self.from_speedscope(doc)
        require_relative "speedscope"
        new(doc.fetch("loadscan").fetch("name"), entries: Speedscope.entries(doc)).tap { |t| t.samples = doc["loadscan"]["samples"] }
      end

      # The entries as Hashes (times rounded to the microsecond; none, mostly GC's, as 0).
      def to_h
        entries = @entries.map do |e|
          { "id" => e.id, "parent" => e.parent, "kind" => e.kind.to_s, "label" => e.label, "file" => e.file, "gem" => e.gem,
            "start" => ms(e.start), "wall" => ms(e.wall), "cpu" => ms(e.cpu), "allocated" => e.allocated,
            "gc" => ms(e.gc), "self_wall" => ms(e.self_wall), "self_cpu" => ms(e.self_cpu),
            "self_allocated" => e.self_allocated, "self_gc" => ms(e.self_gc) }
        end
        { "name" => @name, "total_ms" => total_ms.round(3), "entries" => entries }
      end

      private def ms(value) = value.zero? ? 0 : value.round(3)

      def root = @entries.first
      def total_ms = root.wall
      def gc_ms = root.gc
      def allocated = root.allocated

      # Self time outside any require (the boot's own entry).
      def outside_ms = root.self_wall

      # GC is apart in every ranking: an entry's own time without GC (`Tree.own`), its GC beside.
      def self.own(entry) = entry.self_wall - entry.self_gc

      # `[gem, figures]` by self time without GC, most first (the first `top` only, when given):
      # what the gem's own files, initializers and methods did. `self_ms` is without GC,
      # `gc_ms` the GC in it.
      def gems(top = nil)
        sums = {}
        @entries.each do |e|
          s = sums[e.gem] ||= [0.0, 0.0, 0, 0.0, 0]
          s[0] += e.self_wall - e.self_gc
          s[1] += e.self_cpu
          s[2] += e.self_allocated
          s[3] += e.self_gc
          s[4] += 1 if LOADS.include?(e.kind)
        end
        sums = top ? sums.max_by(top) { |_, s| s[0] } : sums.sort_by { |_, s| -s[0] }
        sums.map do |gem, (wall, cpu, allocated, gc, files)|
          [gem, { "self_ms" => wall, "gc_ms" => gc, "cpu_ms" => cpu, "allocated" => allocated, "files" => files }]
        end
      end

      # How many gems have entries.
      def gem_count = @entries.map(&:gem).uniq.size

      # Entries that loaded a file, by self time without GC, most first (the first `top` only: no sort of them all).
      def features(top = nil)
        loads = @entries.select { |e| LOADS.include?(e.kind) }
        top ? loads.max_by(top) { |e| Tree.own(e) } : loads.sort_by { |e| -Tree.own(e) }
      end

      # How many entries loaded a file.
      def files = @entries.count { |e| LOADS.include?(e.kind) }

      # The methods of other gems that entries ran (:call entries, from the stack samples), one
      # per method and gem with its calls' figures summed, by self time without GC, most first:
      # `{ "label", "gem", "file", "self_ms", "gc_ms", "total_ms", "allocated", "calls", "from" }`
      # (`from`: the entry that ran it most, by label).
      def calls(top = nil)
        sums = {}
        @entries.each do |e|
          next unless e.kind == :call

          s = sums[[e.label, e.gem]] ||= { "label" => e.label, "gem" => e.gem, "file" => e.file, "self_ms" => 0.0, "gc_ms" => 0.0,
                                           "total_ms" => 0.0, "allocated" => 0, "calls" => 0, "by" => Hash.new(0.0) }
          s["self_ms"] += Tree.own(e)
          s["gc_ms"] += e.self_gc
          s["total_ms"] += e.wall
          s["allocated"] += e.self_allocated
          s["calls"] += 1
          s["by"][caller_of(e).label] += e.wall
        end
        list = sums.values.sort_by { |s| -s["self_ms"] }
        list = list.first(top) if top
        list.each { |s| s["from"] = s.delete("by").max_by { |_, ms| ms }&.first }
      end

      # How many methods `calls` has in all.
      def call_count = @entries.select { |e| e.kind == :call }.map { |e| [e.label, e.gem] }.uniq.size

      # The entry (not a call) a call is under.
      def caller_of(entry)
        entry = @entries[entry.parent] while entry.kind == :call
        entry
      end

      # Bundler's setup and require, Rails' initializers: by inclusive time (what running each
      # cost), most first.
      def initializers = @entries.select { |e| PHASES.include?(e.kind) }.sort_by { |e| -e.wall }

      # The entries of `entry`, in order.
      def children(entry) = entry.children.map { |id| @entries[id] }

      private

      # One pass over the nodes in the order they opened (a node's parent is an earlier node),
      # in time order with the samples (`samples`: Samples' data, or nil): each stretch of an
      # entry's own time between its entries gets its calls (Samples#gap) before the next entry.
      def build(nodes, samples)
        gems = GemDirs.new
        sampled = samples && Samples.new(samples, gems)
        @samples = sampled&.count
        bundler = nil
        start = nodes[0][WALL0]
        list = []
        open = [] # [node index, entry, readings where its current stretch began]
        close = lambda do
          index, entry, from = open.pop
          n = nodes[index]
          to = [n[WALL1], n[CPU1], n[ALLOC1], n[GC1]]
          sampled&.gap(entry, from, to, list, start)
          open.last[2] = to unless open.empty?
        end
        nodes.each_with_index do |n, index|
          close.call while !open.empty? && open.last[0] != n[PARENT]
          began = [n[WALL0], n[CPU0], n[ALLOC0], n[GC0]]
          sampled&.gap(open.last[1], open.last[2], began, list, start) unless open.empty?
          label = text(n[LABEL])
          label = gems.short(label) if label.start_with?("/")
          file = (f = n[FILE]) && text(f)
          wall = (n[WALL1] - n[WALL0]) / 1_000_000.0 # the recorder's nanoseconds, as milliseconds
          cpu = (n[CPU1] - n[CPU0]) / 1_000_000.0
          allocated = n[ALLOC1] - n[ALLOC0]
          gc = (n[GC1] - n[GC0]) / 1_000_000.0
          kind = n[KIND]
          parent = open.last&.[](1)
          gem = case kind
                when :boot then "(outside any require)"
                when :startup then "(ruby start)"
                when :phase then bundler ||= gems.of($LOADED_FEATURES.find { |f| f.end_with?("/bundler.rb") }) || "bundler"
                else gems.of(file) || parent.gem
                end
          entry = Entry.new(list.size, parent&.id, kind, label, file, gem, (n[WALL0] - start) / 1_000_000.0, wall, cpu, allocated, gc,
                            wall, cpu, allocated, gc, [])
          list << entry
          parent&.adopt(entry)
          open << [index, entry, began]
        end
        close.call until open.empty?
        list
      end

      # A label or path as UTF-8 (a path's bytes need not be: those that are not valid become
      # U+FFFD, so that the JSON and the page can hold it).
      def text(value)
        s = value.to_s
        return s if s.encoding == Encoding::UTF_8 && s.valid_encoding?

        s = s.dup.force_encoding(Encoding::UTF_8)
        s.valid_encoding? ? s : s.scrub
      end

      # Which gem a file belongs to, by directory: the gems RubyGems activated (their
      # directories), Ruby's own library, the app (the current directory), then a gem's usual
      # directory name (`…/gems/name-1.2.3/…`, `…/name/lib/…`).
      class GemDirs
        def initialize
          # A gem's directory by its parent (few: the gem homes) then its own name, so that a
          # file's gem is a prefix test per parent and one Hash lookup, however many gems the
          # app has; Ruby's own library dirs beside. The deepest directory a file is under wins.
          @roots = Hash.new { |h, k| h[k] = {} }
          # (full_gem_path only: Bundler's stub specs load the whole gemspec for most else)
          if defined?(Gem.loaded_specs)
            Gem.loaded_specs.each_value do |spec|
              dir = spec.full_gem_path
              @roots[File.dirname(dir)][File.basename(dir)] = spec.name if dir.start_with?("/")
            end
          end
          @roots = @roots.sort_by { |root, _| -root.length }
          # Without RubyGems (--disable-gems) RbConfig may not be loaded: no Ruby dirs to name then
          # (requiring it here would add a feature to the program's boot).
          config = defined?(RbConfig) ? RbConfig::CONFIG : {}
          @ruby = %w[rubylibdir archdir vendordir vendorarchdir sitedir sitearchdir].filter_map do |k|
            config[k] if config[k].to_s.start_with?("/")
          end.uniq.sort_by { |d| -d.length }
          @ruby_prefixes = @ruby.map { |d| "#{d}/" }
          @last = nil
          @app = "#{Dir.pwd}/"
        end

        def of(file)
          return nil unless file&.start_with?("/")
          # (most often a file of the gem the last one was: a gem's files require its own)
          return @last[1] if @last && @last[1] && file.start_with?(@last[2])

          find(file)
        end

        # An absolute `path` from its gem's (or the app's) directory, less `lib/`.
        def short(path)
          dir = owner(path)&.first&.then { |d| "#{d}/" } || path[%r{\A.*/gems/[^/]+?-\d[^/]*/}] || (@app if path.start_with?(@app))
          dir ? path.delete_prefix(dir).delete_prefix("lib/") : path
        end

        private

        # `[dir, gem, "dir/"]`: the deepest of the gems' directories and Ruby's library dirs (gem
        # nil) that `path` is under, or nil. A gem's directory holds none of Ruby's: a file under
        # the gem's directory found last (as most are: a gem's files require its own) is that gem's.
        def owner(path)
          return @last if @last && path.start_with?(@last[2])

          @roots.each do |root, names|
            next unless path.start_with?(root) && path[root.length] == "/"

            stop = path.index("/", root.length + 1) or next
            name = names[path[root.length + 1...stop]] or next
            dir = path[0...stop]
            return @last = [dir, name, "#{dir}/"]
          end
          return unless path.start_with?(*@ruby_prefixes)

          ruby = @ruby.find { |d| path.start_with?(d) && path[d.length] == "/" }
          [ruby, nil, "#{ruby}/"]
        end

        def find(file)
          dir, gem = owner(file)
          if dir
            return gem if gem

            # Ruby's library: its default gems by their directory (`ruby/bundler`, `ruby/prism`).
            top = file.delete_prefix("#{dir}/")[%r{\A(?:\d+\.\d+\.\d+/)?([^/]+)/}, 1]
            return top ? "ruby/#{top}" : "ruby"
          end
          # A gem's compiled extensions: `…/extensions/x86_64-linux/3.4.0/name-1.2.3/…`.
          file[%r{/extensions/[^/]+/[^/]+/([^/]+?)-\d[^/]*/}, 1] || file[%r{/gems/([^/]+?)-\d[^/]*/}, 1] ||
            (file.start_with?(@app) && "app") ||
            file[%r{/([^/]+?)(?:-\d[^/]*)?/lib/}, 1] || "(other)"
        end
      end
    end
  end
end
