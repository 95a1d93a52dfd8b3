# frozen_string_literal: true

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
                         :self_wall, :self_cpu, :self_allocated, :self_gc, :children, keyword_init: true)

      # Kinds of entry that load a file.
      LOADS = %i[require require_relative load].freeze
      # Kinds of entry that are a part of the boot: Bundler's (:phase) and Rails' initializers.
      PHASES = %i[phase initializer].freeze

      attr_reader :name, :entries

      # From the recorder's nodes (Profile); or, with `entries:`, from `to_h`'s.
      def initialize(name, nodes = nil, entries: nil)
        @name = name
        @entries = entries || build(nodes)
      end

      def self.from_h(data)
        entries = data.fetch("entries").map do |e|
          Entry.new(**Entry.members.to_h { |m| [m, e[m.to_s]] }.merge(kind: e["kind"].to_sym, children: []))
        end
        entries.each { |e| entries[e.parent].children << e.id if e.parent }
        new(data.fetch("name"), entries: entries)
      end

      def to_h
        { "name" => @name, "total_ms" => total_ms,
          "entries" => @entries.map { |e| e.to_h.except(:children).transform_keys(&:to_s).merge("kind" => e.kind.to_s) } }
      end

      def root = @entries.first
      def total_ms = root.wall
      def gc_ms = root.gc
      def allocated = root.allocated

      # Self time outside any require (the boot's own entry).
      def outside_ms = root.self_wall

      # `[gem, figures]` by self time, most first: what the gem's own files and initializers did.
      def gems
        sums = Hash.new { |h, k| h[k] = { "self_ms" => 0.0, "cpu_ms" => 0.0, "allocated" => 0, "gc_ms" => 0.0, "files" => 0 } }
        @entries.each do |e|
          s = sums[e.gem]
          s["self_ms"] += e.self_wall
          s["cpu_ms"] += e.self_cpu
          s["allocated"] += e.self_allocated
          s["gc_ms"] += e.self_gc
          s["files"] += 1 if LOADS.include?(e.kind)
        end
        sums.sort_by { |_, s| -s["self_ms"] }
      end

      # Entries that loaded a file, by self time, most first.
      def features = @entries.select { |e| LOADS.include?(e.kind) }.sort_by { |e| -e.self_wall }

      # Bundler's setup and require, Rails' initializers: by inclusive time (what running each
      # cost), most first.
      def initializers = @entries.select { |e| PHASES.include?(e.kind) }.sort_by { |e| -e.wall }

      # The entries of `entry`, in order.
      def children(entry) = entry.children.map { |id| @entries[id] }

      private

      def build(nodes)
        gems = GemDirs.new
        list = nodes.each_with_index.map do |n, id|
          label = text(n[LABEL])
          Entry.new(id: id, parent: n[PARENT], kind: n[KIND], label: label.start_with?("/") ? gems.short(label) : label, file: n[FILE] && text(n[FILE]),
                    start: n[WALL0] - nodes[0][WALL0], wall: n[WALL1] - n[WALL0], cpu: n[CPU1] - n[CPU0],
                    allocated: n[ALLOC1] - n[ALLOC0], gc: n[GC1] - n[GC0], children: [])
        end
        list.each do |e|
          list[e.parent].children << e.id if e.parent
          e.gem = if e.kind == :boot then "(outside any require)"
                  elsif e.kind == :startup then "(ruby start)"
                  elsif e.kind == :phase then gems.of($LOADED_FEATURES.find { |f| f.end_with?("/bundler.rb") }) || "bundler"
                  else gems.of(e.file) || list[e.parent].gem
                  end
        end
        list.each do |e|
          kids = e.children.map { |id| list[id] }
          e.self_wall = e.wall - kids.sum(0.0, &:wall)
          e.self_cpu = e.cpu - kids.sum(0.0, &:cpu)
          e.self_allocated = e.allocated - kids.sum(0, &:allocated)
          e.self_gc = e.gc - kids.sum(0.0, &:gc)
        end
        list
      end

      # A label or path as UTF-8 (a path's bytes need not be: those that are not valid become
      # U+FFFD, so that the JSON and the page can hold it).
      def text(value)
        s = value.to_s.dup.force_encoding(Encoding::UTF_8)
        s.valid_encoding? ? s : s.scrub
      end

      # Which gem a file belongs to, by directory: the gems RubyGems activated (their
      # directories), Ruby's own library, the app (the current directory), then a gem's usual
      # directory name (`…/gems/name-1.2.3/…`, `…/name/lib/…`).
      class GemDirs
        def initialize
          @dirs = []
          Gem.loaded_specs.each_value { |spec| @dirs << ["#{spec.full_gem_path}/", spec.name] } if defined?(Gem.loaded_specs)
          @ruby = %w[rubylibdir archdir vendordir vendorarchdir sitedir sitearchdir].filter_map do |k|
            "#{RbConfig::CONFIG[k]}/" if RbConfig::CONFIG[k].to_s.start_with?("/")
          end.sort_by { |dir| -dir.size }
          @dirs.sort_by! { |dir, _| -dir.size }
          @app = "#{Dir.pwd}/"
          @cache = {}
        end

        def of(file)
          return nil unless file&.start_with?("/")

          @cache[File.dirname(file)] ||= find(file)
        end

        # An absolute `path` from its gem's (or the app's) directory, less `lib/`.
        def short(path)
          dir = @dirs.find { |d, _| path.start_with?(d) }&.first || @ruby.find { |d| path.start_with?(d) } ||
                path[%r{\A.*/gems/[^/]+?-\d[^/]*/}] ||
                (@app if path.start_with?(@app))
          dir ? path.delete_prefix(dir).delete_prefix("lib/") : path
        end

        private

        def find(file)
          @dirs.each { |dir, name| return name if file.start_with?(dir) }
          # Ruby's library: its default gems by their directory (`ruby/bundler`, `ruby/prism`).
          @ruby.each do |dir|
            next unless file.start_with?(dir)

            top = file.delete_prefix(dir)[%r{\A(?:\d+\.\d+\.\d+/)?([^/]+)/}, 1]
            return top ? "ruby/#{top}" : "ruby"
          end
          file[%r{/gems/([^/]+?)-\d[^/]*/}, 1] || (file.start_with?(@app) && "app") ||
            file[%r{/([^/]+?)(?:-\d[^/]*)?/lib/}, 1] || "(other)"
        end
      end
    end
  end
end
