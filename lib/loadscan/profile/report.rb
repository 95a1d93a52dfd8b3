# frozen_string_literal: true

module Loadscan
  class Profile
    # The summary `loadscan profile` prints (bumbler's shape): the boot's total, the gems by self
    # time, the features, the initializers, GC's share.
    #
    #   boot: 1843.2 ms (bin/rails runner nil), 2410 files, 3 912 004 objects, GC 61.0 ms (3.3%)
    #   gems by self time:
    #       412.0 ms  22.4%  activesupport (188 files, 402 113 objects)
    module Report
      module_function

      def text(tree, top: 10)
        total = tree.total_ms
        lines = ["boot: #{ms(total)} (#{tree.name}), #{tree.files} files, #{count(tree.allocated)} objects, " \
                 "GC #{ms(tree.gc_ms)} (#{pct(tree.gc_ms, total)}), outside any require #{ms(tree.outside_ms)}"]
        lines << "gems by self time:"
        tree.gems(top).each do |gem, s|
          lines << "  #{ms(s["self_ms"]).rjust(10)} #{pct(s["self_ms"], total).rjust(6)}  #{gem} " \
                   "(#{s["files"]} files, #{count(s["allocated"])} objects, GC #{ms(s["gc_ms"])})"
        end
        lines << "features by self time:"
        tree.features(top).each do |e|
          by = tree.entries[e.parent]
          lines << "  #{ms(e.self_wall).rjust(10)} #{pct(e.self_wall, total).rjust(6)}  #{e.label} [#{e.gem}] " \
                   "(#{ms(e.wall)} with what it loaded, #{count(e.self_allocated)} objects; from #{by.kind == :boot ? "the boot" : by.label})"
        end
        initializers = tree.initializers
        unless initializers.empty?
          lines << "Bundler and initializers:"
          initializers.first(top).each { |e| lines << "  #{ms(e.wall).rjust(10)} #{pct(e.wall, total).rjust(6)}  #{e.label}" }
        end
        lines
      end

      def ms(value) = format("%.1f ms", value)
      def pct(part, whole) = whole.positive? ? format("%.1f%%", 100.0 * part / whole) : "-"
      def count(n) = n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
