# frozen_string_literal: true

module Loadscan
  class Installer
    # The Dockerfile Rails (7.1 and later) generates: `loadscan build` beside its `RUN bundle
    # exec bootsnap precompile … app/ lib/` (after the app's code is copied in), and in the final
    # stage the settings its boots need: the cache read-only (the app's user never writes it), and
    # checked by listing, since a container's directories are not the ones the build stat'ed
    # (the final stage copies them: new inodes; overlayfs gives directories a device number of
    # each mount). A Dockerfile of another shape is left alone, with a note.
    module Dockerfile
      Instruction = Struct.new(:keyword, :args, :first, :last) # lines: indices in the file
      BOOTSNAP = /\Abundle\s+exec\s+bootsnap\s+precompile\b(?!.*--gemfile)/
      BUILD = ["", "# Write loadscan's load-path cache (tmp/cache/loadscan); the image's boots use it read-only.",
               "RUN bundle exec loadscan build"].freeze
      RUNTIME = ["", "# loadscan: use the cache `loadscan build` wrote, never write it, and check it by listing",
                 "# (a container's directories are new inodes and devices, not the ones the build saw).",
                 'ENV LOADSCAN_READONLY="1" LOADSCAN_VALIDATE="listing"'].freeze

      module_function

      # [new text, nil], or [text, why it was left alone].
      def after(rel, text, eol)
        lines = text.lines
        steps = instructions(lines) or return [text, unknown(rel, "it has a heredoc")]
        anchors = steps.select { |s| s.keyword == "RUN" && s.args.match?(BOOTSNAP) }
        return [text, unknown(rel, "no single `RUN bundle exec bootsnap precompile … app/ lib/` step")] unless anchors.size == 1

        inserts = Hash.new { |h, k| h[k] = [] }
        inserts[anchors[0].last + 1].concat(BUILD) unless steps.any? { |s| s.args.match?(/\bloadscan\s+build\b/) }
        final = steps.reverse.find { |s| s.keyword == "FROM" }
        inserts[final.last + 1].concat(RUNTIME) unless steps.any? { |s| s.args.include?("LOADSCAN_READONLY") }
        [Installer.insert(lines, inserts, eol), nil]
      end

      # [text without the lines `after` adds, nil], or [text, a note] when it still mentions
      # loadscan elsewhere (those lines are left to the user).
      def without(rel, text)
        lines = text.lines
        [BUILD, RUNTIME].each do |block|
          at = (0..lines.size - block.size).find { |i| lines[i, block.size].map(&:chomp) == block }
          lines.slice!(at, block.size) if at
        end
        after = lines.join
        return [after, nil] unless after.match?(/loadscan/i)

        [after, "#{rel} still mentions loadscan (lines #{after.lines.each_index.select { |i| after.lines[i].match?(/loadscan/i) }.map { _1 + 1 }.join(", ")}): " \
                "remove those by hand"]
      end

      def unknown(rel, why)
        "#{rel} left as it is (#{why}): add `RUN bundle exec loadscan build` after the app's code is copied, and " \
          "`LOADSCAN_READONLY=1 LOADSCAN_VALIDATE=listing` to its boots' environment, by hand (README: Docker)"
      end

      # The instructions (continuation lines joined, comments dropped), or nil for a heredoc.
      def instructions(lines)
        escape = "\\"
        steps = []
        current = nil
        directives = true
        lines.each_with_index do |raw, i|
          line = raw.chomp.strip
          if directives && (directive = line.match(/\A#\s*([a-z]+)\s*=\s*(\S+)\z/i))
            escape = directive[2] if directive[1].casecmp?("escape")
            next
          end
          directives = false
          next if line.empty? || line.start_with?("#") # a comment, also inside a continuation

          unless current
            current = Instruction.new(line[/\A\S+/].upcase, +"", i, i)
            line = line.sub(/\A\S+\s*/, "")
          end
          current.last = i
          if line.end_with?(escape)
            current.args << line.chomp(escape) << " "
          else
            steps << current.tap { |s| s.args << line }
            current = nil
          end
        end
        steps << current if current
        steps.any? { |s| s.args.match?(/<<-?["']?[A-Za-z_]/) } ? nil : steps
      end
    end
  end
end
