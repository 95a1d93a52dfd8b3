# frozen_string_literal: true

module Loadscan
  class Installer
    # The Gemfile: whether every boot's bundle has loadscan (config/boot.rb requires it on every
    # boot), read from its `gem "loadscan"` calls, and the line that makes it so when it has none.
    module Gemfile
      # Bundler's blocks every boot's bundle has, and those some boots' bundles lack.
      EVERY_BOOT = %w[source git github path gitlab bitbucket].freeze
      SOME_BOOTS = %w[group platforms platform install_if env].freeze
      # `gem` options that leave it out of some boots' bundles (`group: :default` does not).
      CONDITIONS = %w[group groups platform platforms install_if optional].freeze

      module_function

      # `text` with loadscan in it for every boot: unchanged, or with a `gem "loadscan"` line at
      # the end. Raises Refused when the Gemfile names loadscan only for some boots.
      def after(rel, text, eol, rails:)
        source = RubySource.new(rel, text)
        found = declarations(source)
        return text if found.value?(nil)
        raise Refused, only_some(rel, source, found) unless found.empty?

        line = %(gem "loadscan", require: #{rails ? '"loadscan/railtie"' : "false"} # a load-path cache for require)
        after = text.empty? || text.end_with?("\n") ? "#{text}#{line}#{eol}" : "#{text}#{eol}#{line}#{eol}"
        return after if declarations(RubySource.new(rel, after)).value?(nil)

        raise Refused, "#{rel}: a `gem \"loadscan\"` line added at its end would not be read as one (__END__?); #{BY_HAND}"
      end

      def only_some(rel, source, found)
        where = found.map { |line, why| "line #{line} (#{source.line(line).strip}), #{why}" }.join("; ")
        "#{rel} names loadscan only for some boots: #{where}. config/boot.rb's `require \"loadscan/setup\"` would raise " \
          "LoadError where the bundle lacks it (BUNDLE_WITHOUT, another platform): make it a top-level `gem \"loadscan\"` " \
          "line, then run `loadscan install` again"
      end

      # `{line => nil}` for each `gem "loadscan"` every boot's bundle has, `{line => why not}` for
      # the others: in a block or with options some boots lack, or in code not read here.
      def declarations(source)
        found = {}
        walk(source, source.statements, nil, found)
        deep(source.statements).each { |line| found[line] = "inside code loadscan install does not read" unless found.key?(line) }
        found
      end

      def walk(source, statements, condition, found)
        statements.each do |node|
          call = RubySource.call(node)
          if loadscan?(call)
            found[RubySource.first_line(node)] = condition || options_condition(call)
          elsif call&.block && call.receiver.nil? && EVERY_BOOT.include?(call.name)
            walk(source, call.block, condition, found)
          elsif call&.block && call.receiver.nil? && SOME_BOOTS.include?(call.name)
            inside = "inside `#{source.line(RubySource.first_line(node)).strip}`" unless default_group?(call.name, call.args)
            walk(source, call.block, condition || inside, found)
          else
            deep(node).each { |line| found[line] = condition || "inside code loadscan install does not read (line #{RubySource.first_line(node)})" }
          end
        end
      end

      def loadscan?(call) = call && call.name == "gem" && call.receiver.nil? && RubySource.string(call.args[0]) == "loadscan"

      # The lines of every `gem "loadscan"` call in `node`.
      def deep(node, lines = [])
        return lines unless node.is_a?(Array)

        loadscan?(RubySource.call(node)) ? lines << RubySource.first_line(node) : node.each { |child| deep(child, lines) }
        lines
      end

      def options_condition(call)
        RubySource.options(call.args)&.each do |key, value|
          return "with options loadscan install does not read" if key.nil?
          next unless CONDITIONS.include?(key)
          return "with `#{key}:`" unless default_group?(key, [value])
        end
        nil
      end

      # A group list with Bundler's default group, which every boot has (`group :default`,
      # `group: [:default, :test]`): a gem in it is left out only when all its groups are.
      def default_group?(name, values)
        return false unless name.start_with?("group")

        values = values[0][1] if values.size == 1 && values[0].is_a?(Array) && values[0][0] == :array
        values.any? { |v| [RubySource.symbol(v), RubySource.string(v)].include?("default") }
      end
    end
  end
end
