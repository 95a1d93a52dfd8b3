# frozen_string_literal: true

require "ripper"

module Loadscan
  class Installer
    # A Ruby file the installer reads (Gemfile, config/boot.rb): compiled to check it parses as
    # the running Ruby parses it (nothing runs), then read with Ripper, whose trees are the same
    # on 3.1, 3.3 and 3.4. Nodes are Ripper's S-expressions: `[:command, [:@ident, "gem", [2, 0]],
    # [:args_add_block, [...], false]]`; a position is `[line, column]`, lines from 1.
    class RubySource
      # A call as the installer reads one: `name`, `receiver` (a node, or nil), `args` (nodes),
      # `block` (the statements of its do/brace block, or nil), `node`.
      Call = Struct.new(:name, :receiver, :args, :block, :node)

      attr_reader :rel, :lines

      # Raises Refused when `text` does not parse.
      def initialize(rel, text)
        @rel = rel
        @lines = text.lines
        error = RubySource.syntax_error(text, rel)
        raise Refused, "#{rel} does not parse (#{error}): fix it, then run `loadscan install` again" if error

        @tree = Ripper.sexp(text) or raise Refused, "#{rel} does not parse: fix it, then run `loadscan install` again"
        @tokens = Ripper.lex(text)
      end

      # Why `text` does not compile, or nil.
      def self.syntax_error(text, rel)
        verbose = $VERBOSE
        $VERBOSE = nil
        RubyVM::InstructionSequence.compile(text, rel)
        nil
      rescue SyntaxError => e
        # parse.y's one line, or Prism's first line and the message under its first caret.
        lines = e.message.lines.map(&:strip)
        caret = lines.find { |l| l.match?(/\A\|\s*\^/) }
        caret ? "#{lines.first}: #{caret.sub(/\A\|\s*\^~*\s*/, "")}" : lines.first
      ensure
        $VERBOSE = verbose
      end

      # The top-level statements.
      def statements = @tree[1]

      # The tokens of code (not comments) whose text matches `pattern`: `[[line, column], text]`.
      def mentions(pattern)
        @tokens.filter_map do |pos, event, tok|
          [pos, tok] if !%i[on_comment on_embdoc on_embdoc_beg on_embdoc_end].include?(event) && tok.match?(pattern)
        end
      end

      # The line (from 1) as written, without its line ending.
      def line(number) = @lines[number - 1].to_s.chomp

      # "line N: TEXT" for each line, for messages.
      def where(numbers) = numbers.uniq.map { |n| "line #{n}: #{line(n).strip}" }.join("; ")

      class << self
        # `node` as a Call, or nil when it is not one.
        def call(node)
          return nil unless node.is_a?(Array)

          case node[0]
          when :command then Call.new(ident(node[1]), nil, arguments(node[2]), nil, node)
          when :command_call then Call.new(ident(node[3]), node[1], arguments(node[4]), nil, node)
          when :fcall, :vcall then Call.new(ident(node[1]), nil, [], nil, node)
          when :call then Call.new(ident(node[3]), node[1], [], nil, node)
          when :method_add_arg
            inner = call(node[1]) or return nil
            paren = node[2]
            Call.new(inner.name, inner.receiver, arguments(paren.is_a?(Array) && paren[0] == :arg_paren ? paren[1] : paren), nil, node)
          when :method_add_block
            inner = call(node[1]) or return nil
            Call.new(inner.name, inner.receiver, inner.args, block_statements(node[2]), node)
          end
        end

        # `require "feature"`'s feature (one plain string argument, no receiver), or nil.
        def required(node)
          c = call(node)
          return nil unless c && c.name == "require" && c.receiver.nil? && c.block.nil? && c.args.size == 1

          string(c.args[0])
        end

        # A string literal's text (no interpolation), or nil.
        def string(node)
          return nil unless node.is_a?(Array) && node[0] == :string_literal

          parts = node[1].is_a?(Array) && node[1][0] == :string_content ? node[1][1..] : nil
          return "" if parts == []
          return nil unless parts&.size == 1 && parts[0][0] == :@tstring_content

          parts[0][1]
        end

        # A symbol literal's name, or nil.
        def symbol(node)
          return nil unless node.is_a?(Array) && node[0] == :symbol_literal

          sym = node[1]
          sym = sym[1] if sym.is_a?(Array) && sym[0] == :symbol
          sym.is_a?(Array) && sym[0].to_s.start_with?("@") ? sym[1] : nil
        end

        # `[key, value]` pairs of a trailing hash argument (`a: 1`, `:a => 1`, `"a" => 1`), keys
        # as strings (nil for one that is not a literal); nil when the last argument is no hash.
        def options(args)
          last = args.last
          pairs = case last&.first
                  when :bare_assoc_hash then last[1]
                  when :hash then last[1] && last[1][1]
                  end
          pairs&.map { |assoc| assoc[0] == :assoc_new ? [key(assoc[1]), assoc[2]] : [nil, assoc] }
        end

        def key(node)
          return node[1].delete_suffix(":") if node.is_a?(Array) && node[0] == :@label

          symbol(node) || string(node)
        end

        # Every position in `node`, for telling which tokens belong to it.
        def positions(node, into = {})
          return into unless node.is_a?(Array)

          if node[0].is_a?(Symbol) && node[0].to_s.start_with?("@") && node[2].is_a?(Array)
            into[node[2]] = true
          else
            node.each { |child| positions(child, into) }
          end
          into
        end

        # The argument nodes of an argument list (`[:args_add_block, [...], false]` or `[...]`).
        def arguments(node)
          node = node[1] if node.is_a?(Array) && node[0] == :args_add_block
          node.is_a?(Array) && !node[0].is_a?(Symbol) ? node : []
        end

        # The first line `node` spans.
        def first_line(node) = positions(node).keys.map(&:first).min

        private

        def ident(node) = node.is_a?(Array) && node[0].to_s.start_with?("@") ? node[1] : nil

        def block_statements(block)
          body = block[2]
          body = body[1] if body.is_a?(Array) && body[0] == :bodystmt
          body.is_a?(Array) && !body[0].is_a?(Symbol) ? body : []
        end
      end
    end
  end
end
