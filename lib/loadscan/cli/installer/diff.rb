# frozen_string_literal: true

module Loadscan
  class Installer
    # A unified diff (`diff -u`'s format: three lines of context, `\ No newline at end of file`)
    # of two texts, made here so that `loadscan install` needs no diff(1). Lines are compared
    # with their endings; they are shown without them.
    module Diff
      CONTEXT = 3

      module_function

      # The diff of `before` and `after` as `path`, or "" when they are equal.
      def unified(path, before, after)
        return "" if before == after

        ops = edits(before.lines, after.lines)
        hunks(ops).map { |hunk| hunk_text(hunk) }.join.prepend("--- a/#{path}\n+++ b/#{path}\n")
      end

      # `[op, line, old_index, new_index]` for every line, op `" "`, `"-"` or `"+"`, from a longest
      # common subsequence (the files edited are small: a quadratic table is fine).
      def edits(old, new)
        lcs = Array.new(old.size + 1) { Array.new(new.size + 1, 0) }
        (old.size - 1).downto(0) do |i|
          (new.size - 1).downto(0) do |j|
            lcs[i][j] = old[i] == new[j] ? lcs[i + 1][j + 1] + 1 : [lcs[i + 1][j], lcs[i][j + 1]].max
          end
        end
        ops = []
        i = j = 0
        while i < old.size || j < new.size
          if i < old.size && j < new.size && old[i] == new[j]
            ops << [" ", old[i], i, j]
            i += 1
            j += 1
          elsif i < old.size && (j == new.size || lcs[i + 1][j] >= lcs[i][j + 1])
            ops << ["-", old[i], i, j] # a line replaced: "-" first, as diff(1)
            i += 1
          else
            ops << ["+", new[j], i, j]
            j += 1
          end
        end
        ops
      end

      # The edits grouped into hunks: each change with up to CONTEXT unchanged lines around it,
      # hunks closer than twice that merged.
      def hunks(ops)
        changed = ops.each_index.reject { |k| ops[k][0] == " " }
        groups = changed.slice_when { |a, b| b - a - 1 > 2 * CONTEXT }
        groups.map { |g| ops[[g.first - CONTEXT, 0].max..[g.last + CONTEXT, ops.size - 1].min] }
      end

      def hunk_text(hunk)
        first = hunk.first
        old_count = hunk.count { |op| op[0] != "+" }
        new_count = hunk.count { |op| op[0] != "-" }
        body = hunk.map do |op, line, *|
          shown = "#{op}#{line.chomp}\n"
          line.end_with?("\n") ? shown : "#{shown}\\ No newline at end of file\n"
        end
        "@@ -#{range(first[2], old_count)} +#{range(first[3], new_count)} @@\n#{body.join}"
      end

      # diff's range: the first line (from 1; for no lines, the one before) and the count if not 1.
      def range(start, count)
        return "#{start},0" if count.zero?

        count == 1 ? (start + 1).to_s : "#{start + 1},#{count}"
      end
    end
  end
end
