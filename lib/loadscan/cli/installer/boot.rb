# frozen_string_literal: true

module Loadscan
  class Installer
    # config/boot.rb: the first line (FIRST_LINE: config/loadscan_boot.rb, loadscan set up before
    # Bundler from the copy Gemfile.lock names) just before its one top-level `require
    # "bundler/setup"`, and `require "loadscan/setup"` after it, before Rails' `require
    # "bootsnap/setup"`: where the first line finds no loadscan (another Ruby, a version not
    # installed), loadscan/setup sets it up once Bundler has, as before (Loadscan.setup does it
    # once). loadscan/setup turns Bootsnap's load-path cache off (it would answer requires before
    # loadscan) only when loadscan is engaged, so a boot without it (LOADSCAN_DISABLE=1, no Rust
    # to build it) keeps Bootsnap's. Every `BOOTSNAP_*` setting and config/bootsnap.rb keep
    # working; a hand-written `Bootsnap.setup` with `load_path_cache: false` is kept as it is. A
    # `require "loadscan/setup"` after `require "bootsnap/setup"` (where loadscan answers almost
    # nothing) is moved before it; the line earlier installs wrote (turning Bootsnap's cache off
    # on every boot) is taken out. Only these top-level statements, each alone on its line, are
    # recognised: any other mention of Bundler's setup, Bootsnap or loadscan's lines in code
    # (comments are not code) makes it refuse. `without` takes loadscan's lines out again.
    module Boot
      BUNDLER_LINE = /\A\s*require[ (]\s*["']bundler\/setup["']\s*\)?\s*(#.*)?\z/
      BOOTSNAP_LINE = /\A\s*require[ (]\s*["']bootsnap\/setup["']\s*\)?\s*(#.*)?\z/
      LOADSCAN_LINE = /\A\s*require[ (]\s*["']loadscan\/setup["']\s*\)?\s*(#.*)?\z/
      LOADSCAN_SETUP = %(require "loadscan/setup")
      # The file the first line loads (beside config/boot.rb), and the line.
      BOOTSTRAP = "loadscan_boot.rb"
      FIRST_LINE = %(load File.expand_path("#{BOOTSTRAP}", __dir__) # loadscan, set up before Bundler)
      FIRST_FORM = /\A\s*load[ (]\s*File\.expand_path\(\s*["']#{Regexp.escape(BOOTSTRAP)}["']\s*,\s*__dir__\s*\)\s*\)?\s*(#.*)?\z/
      NO_LOAD_PATH_CACHE_VAR = "DISABLE_BOOTSNAP_LOAD_PATH_CACHE"
      # What `loadscan install` wrote before `require "bootsnap/setup"` until issue 34: taken out.
      OLD_NO_LOAD_PATH_CACHE = %(ENV["#{NO_LOAD_PATH_CACHE_VAR}"] ||= "1" # loadscan answers require; Bootsnap keeps its compile cache)

      module_function

      # The new text of config/boot.rb (`text` when it needs nothing); raises Refused. The new
      # text is read again: it must parse, hold the first line before `require "bundler/setup"`
      # and `require "loadscan/setup"` as a statement of its own after it (before `require
      # "bootsnap/setup"`), and need nothing more.
      def after(rel, text, eol)
        source = RubySource.new(rel, text)
        after = rewrite(text, *edits(source), eol)
        return after if after == text

        check = RubySource.new(rel, after)
        return after if edits(check) == [[], {}] && loadscan_first?(check)

        raise Refused, "#{rel}: the lines added would not be read as statements of their own; #{BY_HAND}"
      end

      # config/boot.rb without loadscan's lines (`loadscan uninstall`): the first line, `require
      # "loadscan/setup"` and the line earlier installs wrote, each a statement alone on its line;
      # any other mention of loadscan in code: Refused.
      def without(rel, text, eol)
        source = RubySource.new(rel, text)
        lines = first_lines(source) + old_lines(source)
        setups = source.statements.select { |node| RubySource.required(node) == "loadscan/setup" }
        lines += setups.map { |node| alone(source, node, LOADSCAN_LINE) }
        mentions = source.mentions(/loadscan/)
        known = lines.compact.to_h { |n| [n, true] }
        unless lines.all? && mentions.all? { |(line, _), _| known[line] }
          refuse(source, "`#{FIRST_LINE}` and `#{LOADSCAN_SETUP}`, each alone on its line", mentions)
        end
        after = rewrite(text, lines, {}, eol)
        return after if RubySource.new(rel, after).mentions(/loadscan/).empty?

        raise Refused, "#{rel}: loadscan's lines could not be taken out; remove them by hand"
      end

      # `text` without the lines (from 1) in `deletes`, and with `inserts` made (`{index in text's
      # lines => [lines]}`, as Installer.insert).
      def rewrite(text, deletes, inserts, eol)
        lines = text.lines
        # A line taken out goes with its line ending (and the one it gave the line before: none at the end).
        deletes.sort.reverse_each { |n| lines.delete_at(n - 1) }
        moved = Hash.new { |h, k| h[k] = [] }
        inserts.sort.each { |i, added| moved[i - deletes.count { |n| n <= i }].concat(added) }
        Installer.insert(lines, moved, eol)
      end

      # `[lines (from 1) to take out, {line index => [lines to insert before it]}]`.
      def edits(source)
        deletes = old_lines(source)
        inserts = Hash.new { |h, k| h[k] = [] }
        bundler = only_require(source, "bundler/setup", BUNDLER_LINE, "one top-level `require \"bundler/setup\"` line")
        bootsnap = bootsnap_setup(source)
        first = first_lines(source)
        if first.size > 1 || !first.all? || (source.mentions(/#{Regexp.escape(BOOTSTRAP)}/).size > first.size)
          refuse(source, "at most one `#{FIRST_LINE}`, alone on its line", source.mentions(/#{Regexp.escape(BOOTSTRAP)}/))
        end
        if first.empty? || first[0] > bundler
          deletes.concat(first)
          inserts[bundler - 1] << FIRST_LINE
        end
        if source.mentions(%r{loadscan/setup}).empty?
          refuse(source, "`require \"bootsnap/setup\"` after `require \"bundler/setup\"`", source.mentions(/bootsnap/i)) if bootsnap && bootsnap < bundler
          inserts[bundler] << LOADSCAN_SETUP
        elsif !loadscan_first?(source)
          # After Bootsnap's setup, loadscan answers almost nothing (issue 48): moved after Bundler's.
          line = only_require(source, "loadscan/setup", LOADSCAN_LINE, "`require \"loadscan/setup\"` before `require \"bootsnap/setup\"`")
          refuse(source, "`require \"bootsnap/setup\"` after `require \"bundler/setup\"`", source.mentions(/bootsnap/i)) if bootsnap < bundler
          deletes << line
          inserts[bundler] << source.line(line).strip
        end
        [deletes.sort, inserts.reject { |_, added| added.empty? }]
      end

      # The lines (from 1) of each top-level first line, nil for one not alone on its line.
      def first_lines(source)
        loads = source.statements.select do |node|
          call = RubySource.call(node)
          call&.name == "load" && call.receiver.nil? && source.line(RubySource.first_line(node)).include?(BOOTSTRAP)
        end
        loads.map { |node| alone(source, node, FIRST_FORM) }
      end

      # Whether a top-level `require "loadscan/setup"` comes before Rails' `require "bootsnap/setup"`
      # (if any): loadscan/setup decides Bootsnap's load-path cache.
      def loadscan_first?(source)
        loadscan = source.statements.find { |node| RubySource.required(node) == "loadscan/setup" } or return false
        bootsnap = source.statements.find { |node| RubySource.required(node) == "bootsnap/setup" } or return true
        RubySource.first_line(loadscan) < RubySource.first_line(bootsnap)
      end

      # The lines (from 1) holding the line earlier installs wrote, a statement alone on its line.
      def old_lines(source)
        source.statements.filter_map do |node|
          line = RubySource.first_line(node)
          line if env_assignment(node) == [NO_LOAD_PATH_CACHE_VAR, true] && source.line(line).strip == OLD_NO_LOAD_PATH_CACHE
        end
      end

      # The line (from 1) of the one top-level `require "feature"`, alone on a line of `form`,
      # with no other mention of the feature in code; else Refused.
      def only_require(source, feature, form, expected)
        found = source.statements.select { |node| RubySource.required(node) == feature }
        mentions = source.mentions(Regexp.new(Regexp.escape(feature)))
        line = alone(source, found.first, form) if found.size == 1
        return line if line && mentions.all? { |pos, _| RubySource.positions(found.first)[pos] }

        refuse(source, expected, mentions)
      end

      # The statement's line when it is alone there and the line has `form`.
      def alone(source, node, form)
        line = RubySource.first_line(node)
        line if RubySource.positions(node).keys.all? { |l, _| l == line } && source.line(line).match?(form)
      end

      def refuse(source, expected, mentions)
        found = mentions.empty? ? "none" : source.where(mentions.map { |(line, _), _| line })
        raise Refused, "#{source.rel} is not a form loadscan install edits: expected #{expected}, found #{found}; #{BY_HAND}"
      end

      # The line of Rails' `require "bootsnap/setup"`; nil when Bootsnap is absent or set up by
      # hand without its load-path cache. Any other form: Refused.
      def bootsnap_setup(source)
        mentions = source.mentions(/bootsnap/i)
        return nil if mentions.empty?

        envs = source.statements.select { |node| env_assignment(node) }
        known = envs.each_with_object({}) { |node, into| RubySource.positions(node, into) }
        return nil if mentions.all? { |pos, _| known[pos] } || compile_cache_only?(source, mentions, known) # no Bootsnap set up here

        setups = source.statements.select { |node| RubySource.required(node) == "bootsnap/setup" }
        line = alone(source, setups[0], BOOTSNAP_LINE) if setups.size == 1
        refuse(source, BOOTSNAP_FORMS, mentions) unless line && mentions.all? { |pos, _| known[pos] || RubySource.positions(setups[0])[pos] }
        line
      end

      BOOTSNAP_FORMS = "`require \"bootsnap/setup\"` (or a `Bootsnap.setup` with `load_path_cache: false`)"

      # A hand-written `Bootsnap.setup(..., load_path_cache: false)` (with `require "bootsnap"`),
      # every mention of Bootsnap in those statements or in top-level ENV settings.
      def compile_cache_only?(source, mentions, known)
        setups = source.statements.select { |node| compile_cache_setup?(node) }
        return false unless setups.size == 1

        known = known.dup
        source.statements.each do |node|
          RubySource.positions(node, known) if node.equal?(setups[0]) || RubySource.required(node) == "bootsnap"
        end
        mentions.all? { |pos, _| known[pos] }
      end

      def compile_cache_setup?(node)
        call = RubySource.call(node)
        return false unless call&.name == "setup" && call.block.nil? && (call.receiver in [:var_ref, [:@const, "Bootsnap", _]])

        RubySource.options(call.args).to_a.any? { |key, value| key == "load_path_cache" && (value in [:var_ref, [:@kw, "false", _]]) }
      end

      # A top-level `ENV["NAME"] = value` or `ENV["NAME"] ||= value`: [NAME, whether the value
      # is a string literal]; nil for anything else.
      def env_assignment(node)
        return nil unless node in [:assign, [:aref_field, [:var_ref, [:@const, "ENV", _]], _], _] |
                                  [:opassign, [:aref_field, [:var_ref, [:@const, "ENV", _]], _], [:@op, "||=", _], _]

        args = RubySource.arguments(node[1][2])
        name = RubySource.string(args[0]) if args.size == 1
        name && [name, !RubySource.string(node[-1]).nil?]
      end
    end
  end
end
