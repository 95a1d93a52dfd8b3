# frozen_string_literal: true

module Loadscan
  class Installer
    # config/boot.rb: `require "loadscan/setup"` after its one top-level `require
    # "bundler/setup"`, before Rails' `require "bootsnap/setup"`: loadscan/setup turns Bootsnap's
    # load-path cache off (it would answer requires before loadscan) only when loadscan is
    # engaged, so a boot without it (LOADSCAN_DISABLE=1, no Rust to build it) keeps Bootsnap's.
    # Every `BOOTSNAP_*` setting and config/bootsnap.rb keep working; a hand-written
    # `Bootsnap.setup` with `load_path_cache: false` is kept as it is. The line earlier installs
    # wrote (turning Bootsnap's cache off on every boot) is taken out. Only these top-level
    # statements, each alone on its line, are recognised: any other mention of Bundler's setup or
    # Bootsnap in code (comments are not code) makes it refuse.
    module Boot
      BUNDLER_LINE = /\A\s*require[ (]\s*["']bundler\/setup["']\s*\)?\s*(#.*)?\z/
      BOOTSNAP_LINE = /\A\s*require[ (]\s*["']bootsnap\/setup["']\s*\)?\s*(#.*)?\z/
      LOADSCAN_SETUP = %(require "loadscan/setup")
      NO_LOAD_PATH_CACHE_VAR = "DISABLE_BOOTSNAP_LOAD_PATH_CACHE"
      # What `loadscan install` wrote before `require "bootsnap/setup"` until issue 34: taken out.
      OLD_NO_LOAD_PATH_CACHE = %(ENV["#{NO_LOAD_PATH_CACHE_VAR}"] ||= "1" # loadscan answers require; Bootsnap keeps its compile cache)

      module_function

      # The new text of config/boot.rb (`text` when it needs nothing); raises Refused. The new
      # text is read again: it must parse, hold `require "loadscan/setup"` as a statement of its
      # own (before `require "bootsnap/setup"`) and need nothing more.
      def after(rel, text, eol)
        source = RubySource.new(rel, text)
        lines = text.lines
        old = old_lines(source)
        inserts = edits(source)
        # The old line goes, and with it the line ending it gave the line before (none at the end).
        old.sort.reverse_each { |n| lines.delete_at(n - 1) }
        inserts = inserts.transform_keys { |i| i - old.count { |n| n <= i } }
        after = Installer.insert(lines, inserts, eol)
        return after if after == text

        check = RubySource.new(rel, after)
        return after if edits(check).empty? && old_lines(check).empty? && loadscan_first?(check)

        raise Refused, "#{rel}: the lines added would not be read as statements of their own; #{BY_HAND}"
      end

      # `{line index => [lines to insert before it]}`.
      def edits(source)
        inserts = Hash.new { |h, k| h[k] = [] }
        bundler = only_require(source, "bundler/setup", BUNDLER_LINE, "one top-level `require \"bundler/setup\"` line")
        bootsnap = bootsnap_setup(source)
        if source.mentions(%r{loadscan/setup}).empty?
          refuse(source, "`require \"bootsnap/setup\"` after `require \"bundler/setup\"`", source.mentions(/bootsnap/i)) if bootsnap && bootsnap < bundler
          inserts[bundler] << LOADSCAN_SETUP
        elsif !loadscan_first?(source)
          refuse(source, "`require \"loadscan/setup\"` before `require \"bootsnap/setup\"`", source.mentions(%r{loadscan/setup|bootsnap/setup}))
        end
        inserts
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
