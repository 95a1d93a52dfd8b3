# frozen_string_literal: true

module Loadscan
  class Profile
    # The summary `loadscan profile` prints: the boot's total, then the gems, the methods of
    # other gems that entries ran (sampled), the files and the initializers, each list cut to
    # `top` and saying so. Every time that includes GC says how much: own times are without GC,
    # GC beside.
    #
    #   boot: 1843.2 ms (bin/rails runner nil), 2410 files, 3,912,004 objects, GC 61.0 ms (3.3%), outside any require 20.1 ms; 1,702 stack samples
    #   gems by self time without GC (GC beside), 10 of 84:
    #       412.0 ms  22.4%  activesupport (188 files, 402,113 objects, GC 3.1 ms)
    module Report
      module_function

      def text(tree, top: 10)
        total = tree.total_ms
        sampled = tree.samples ? "; #{count(tree.samples)} stack samples" : ""
        lines = ["boot: #{ms(total)} (#{tree.name}), #{tree.files} files, #{count(tree.allocated)} objects, " \
                 "GC #{ms(tree.gc_ms)} (#{pct(tree.gc_ms, total)}), outside any require #{ms(tree.outside_ms)}#{sampled}"]
        lines << "gems by self time without GC (GC beside), #{cut(top, tree.gem_count)}:"
        tree.gems(top).each do |gem, s|
          lines << "  #{ms(s["self_ms"]).rjust(10)} #{pct(s["self_ms"], total).rjust(6)}  #{gem} " \
                   "(#{s["files"]} files, #{count(s["allocated"])} objects, GC #{ms(s["gc_ms"])})"
        end
        calls = tree.calls(top)
        unless calls.empty?
          lines << "methods of other gems that entries ran (sampled), by self time without GC, #{cut(top, tree.call_count)}:"
          calls.each do |c|
            lines << "  #{ms(c["self_ms"]).rjust(10)} #{pct(c["self_ms"], total).rjust(6)}  #{c["label"]} [#{c["gem"]}] " \
                     "(GC #{ms(c["gc_ms"])}, #{count(c["allocated"])} objects; from #{c["from"]})"
          end
        end
        lines << "files by self time without GC (GC beside), #{cut(top, tree.files)}:"
        tree.features(top).each do |e|
          by = tree.entries[e.parent]
          lines << "  #{ms(Tree.own(e)).rjust(10)} #{pct(Tree.own(e), total).rjust(6)}  #{e.label} [#{e.gem}] " \
                   "(GC #{ms(e.self_gc)}; #{ms(e.wall)} with what it loaded, GC #{ms(e.gc)} in that; #{count(e.self_allocated)} objects; " \
                   "from #{by.kind == :boot ? "the boot" : by.label})"
        end
        initializers = tree.initializers
        unless initializers.empty?
          lines << "Bundler and initializers by total time (with what they loaded and ran; GC beside), #{cut(top, initializers.size)}:"
          initializers.first(top).each do |e|
            lines << "  #{ms(e.wall).rjust(10)} #{pct(e.wall, total).rjust(6)}  #{e.label} (GC #{ms(e.gc)}; own #{ms(Tree.own(e))})"
          end
        end
        lines
      end

      # "10 of 84", or "all 7".
      def cut(top, size) = size > top ? "#{top} of #{count(size)}" : "all #{count(size)}"

      # Milliseconds to a tenth, never "-0.0" (an own time is a difference of clock readings).
      def ms(value) = format("%.1f ms", value.round(1).abs < 0.05 ? 0.0 : value)
      def pct(part, whole) = whole.positive? ? format("%.1f%%", (100.0 * part / whole).round(1).abs < 0.05 ? 0.0 : 100.0 * part / whole) : "-"
      def count(n) = n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
