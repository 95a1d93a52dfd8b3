# frozen_string_literal: true

module Loadscan
  class Installer
    # The Gemfile: whether every boot's bundle has loadscan (config/boot.rb requires it on every
    # boot), read from its `gem "loadscan"` calls, and the line that makes it so when it has none.
    # The files it names with `eval_gemfile` are read through; any other way of declaring gems
    # unseen (`instance_eval`, a loop's `gem name`) is refused, naming its line: a second
    # `gem "loadscan"` would break every Bundler command.
    module Gemfile
      # Bundler's blocks every boot's bundle has, and those some boots' bundles lack.
      EVERY_BOOT = %w[source git github path gitlab bitbucket].freeze
      SOME_BOOTS = %w[group platforms platform install_if env].freeze
      # `gem` options that leave it out of some boots' bundles (`group: :default` does not).
      CONDITIONS = %w[group groups platform platforms install_if optional].freeze

      # Calls through which a Gemfile may declare gems the installer cannot read (whatever
      # their receiver), besides a `gem` whose name is not a string literal (a loop's `gem g`).
      OPAQUE = %w[instance_eval instance_exec class_eval class_exec module_eval module_exec eval send __send__
                  public_send method define_method load].freeze
      # How deep `eval_gemfile` is read through, and the largest file it reads.
      MAX_DEPTH = 8
      MAX_BYTES = 1 << 20
      BY_HAND_GEMFILE = "add a top-level `gem \"loadscan\"` line by hand where the bundle reads it, then run " \
                        "`loadscan install` again (README: \"Use\")"

      module_function

      # `text` with loadscan in it for every boot: unchanged, or with a `gem "loadscan"` line at
      # the end. `dir` is the Gemfile's directory (what `eval_gemfile` paths are relative to).
      # Raises Refused when the Gemfile names loadscan only for some boots, or declares gems the
      # installer cannot read (`eval_gemfile` of a file it cannot read through, `instance_eval`,
      # a loop's `gem name`, ...).
      def after(rel, text, eol, rails:, dir:)
        source = RubySource.new(rel, text)
        found = declarations(source, dir)
        return text if found.value?(nil)
        raise Refused, only_some(source, found) unless found.empty?

        line = %(gem "loadscan", require: #{rails ? '"loadscan/railtie"' : "false"} # a load-path cache for require)
        after = text.empty? || text.end_with?("\n") ? "#{text}#{line}#{eol}" : "#{text}#{eol}#{line}#{eol}"
        return after if declarations(RubySource.new(rel, after), dir).value?(nil)

        raise Refused, "#{rel}: a `gem \"loadscan\"` line added at its end would not be read as one (__END__?); #{BY_HAND}"
      end

      # `text` without its `gem "loadscan"` lines (`loadscan uninstall`): each such call must be
      # alone on its line in this file (at the top level or in a block); one elsewhere (a file
      # `eval_gemfile` names, a line it shares): Refused, naming it.
      def without(rel, text, dir:)
        source = RubySource.new(rel, text)
        elsewhere = declarations(source, dir).keys.reject { |(file, _)| file.equal?(source) }
        unless elsewhere.empty?
          raise Refused, "#{elsewhere.map { |file, line| "#{file.rel} line #{line}" }.join(", ")} names loadscan: " \
                         "remove it by hand, then run `loadscan uninstall` again"
        end
        calls = []
        source.statements.each { |node| each_call(node) { |call| calls << call.node if loadscan?(call) } }
        code = source.mentions(/\S/)
        lines = calls.map do |node|
          line = RubySource.first_line(node)
          own = RubySource.positions(node)
          next line if own.keys.all? { |l, _| l == line } &&
                       code.all? { |(l, c), tok| l != line || own[[l, c]] || tok.match?(/\A[\s,;()\[\]"'=>:]*\z/) }

          raise Refused, "#{rel} line #{line} (#{source.line(line).strip}) names loadscan with other code on its line: " \
                         "remove it by hand, then run `loadscan uninstall` again"
        end
        lines.uniq.sort.reverse.each_with_object(text.lines) { |n, kept| kept.delete_at(n - 1) }.join
      end

      def only_some(main, found)
        where = found.map do |(source, line), why|
          "#{"#{source.rel} " unless source.equal?(main)}line #{line} (#{source.line(line).strip}), #{why}"
        end
        "#{main.rel} names loadscan only for some boots: #{where.join("; ")}. config/boot.rb's `require \"loadscan/setup\"` would " \
          "raise LoadError where the bundle lacks it (BUNDLE_WITHOUT, another platform): make it a top-level `gem \"loadscan\"` " \
          "line, then run `loadscan install` again"
      end

      # `{[source, line] => nil}` for each `gem "loadscan"` every boot's bundle has, `{[source,
      # line] => why not}` for the others: in a block or with options some boots lack, or in code
      # not read here. Files `eval_gemfile` names are read through (`source`: the one holding
      # the line). Raises Refused where gems may be declared in a way it cannot read.
      def declarations(source, dir)
        found = {}
        walk(source, source.statements, nil, found, dir, [])
        found
      end

      def walk(source, statements, condition, found, dir, chain)
        statements.each do |node|
          call = RubySource.call(node)
          if loadscan?(call)
            found[[source, RubySource.first_line(node)]] = condition || options_condition(call)
          elsif call&.block && call.receiver.nil? && EVERY_BOOT.include?(call.name)
            walk(source, call.block, condition, found, dir, chain)
          elsif call&.block && call.receiver.nil? && SOME_BOOTS.include?(call.name)
            inside = "inside `#{source.line(RubySource.first_line(node)).strip}`" unless default_group?(call.name, call.args)
            walk(source, call.block, condition || inside, found, dir, chain)
          else
            unread = condition || "inside code loadscan install does not read (line #{RubySource.first_line(node)})"
            each_call(node) do |inner|
              top = inner.node.equal?(node)
              visit(source, inner, top ? condition : unread, found, dir, chain, guarded: !top)
            end
            deep(node).each { |line| found[[source, line]] = unread }
          end
        end
      end

      # A call in code the walk does not read: `eval_gemfile` is read through (its declarations
      # under `condition`), a call that may declare gems unseen is refused.
      # (`guarded`: inside other code, an `if` most often, that may not run it.)
      def visit(source, call, condition, found, dir, chain, guarded: false)
        line = RubySource.first_line(call.node)
        if call.name == "eval_gemfile" && call.receiver.nil?
          read_through(source, call, line, condition, found, dir, chain, guarded: guarded)
        elsif OPAQUE.include?(call.name) || (call.name == "gem" && (call.receiver || !RubySource.string(call.args[0])))
          raise Refused, unseen(source, line, "`#{call.name}`")
        end
      end

      # The file an `eval_gemfile` names, walked as part of the Gemfile when it is a local
      # regular file of UTF-8 Ruby named by a string literal (or `File.expand_path("…", __dir__)`,
      # `File.join(__dir__, "…")`). A file that does not exist is nothing read when something
      # guards the call (`if File.exist?(…)`): Bundler fails on an `eval_gemfile` of no file, so
      # in a bundle that resolves that call never runs; named unguarded, Bundler fails too.
      def read_through(source, call, line, condition, found, dir, chain, guarded: false)
        name = eval_path(call.args) or raise Refused, unseen(source, line, "`eval_gemfile` of a path that is not a string literal")
        path = File.expand_path(name, dir)
        raise Refused, unseen(source, line, "`eval_gemfile` #{MAX_DEPTH} files deep") if chain.size >= MAX_DEPTH
        if !File.exist?(path) && !File.symlink?(path)
          return if guarded

          raise Refused, "#{source.rel} line #{line} (#{source.line(line).strip}) names #{name}, which does not exist: " \
                         "Bundler fails on it too; create it or guard the line (`if File.exist?(…)`), then run `loadscan install` again"
        end

        text, why = read_plain(path)
        raise Refused, unseen(source, line, "`eval_gemfile` of #{name}, which #{why}") if why

        real = File.realpath(path)
        raise Refused, unseen(source, line, "`eval_gemfile` of #{name}, which is evaluated already (a cycle)") if chain.include?(real)

        included = RubySource.new(name, text)
        walk(included, included.statements, condition, found, File.dirname(path), chain + [real])
      end

      def eval_path(args)
        return nil unless args.size == 1

        arg = args[0]
        literal = RubySource.string(arg)
        return literal if literal

        expand = RubySource.call(arg)
        return nil unless (expand&.receiver in [:var_ref, [:@const, "File", _]]) && expand.args.size == 2

        case expand.name
        when "expand_path" then RubySource.string(expand.args[0]) if dir?(expand.args[1])
        when "join" then (name = RubySource.string(expand.args[1])) && !name.start_with?("/") && dir?(expand.args[0]) ? name : nil
        end
      end

      # `__dir__`: the directory of the file read (what paths are relative to here).
      def dir?(arg) = arg in [:vcall | :var_ref, [:@ident | :@kw, "__dir__", _]]

      # A local regular file's UTF-8 text, read without following a fifo: [text, nil], or [nil, why not].
      def read_plain(path)
        File.open(path, File::RDONLY | File::NONBLOCK | File::BINARY) do |f|
          stat = f.stat
          return [nil, "is not a regular file (#{stat.ftype})"] unless stat.file?
          return [nil, "is larger than #{MAX_BYTES} bytes"] if stat.size > MAX_BYTES

          text = f.read.force_encoding(Encoding::UTF_8)
          text.valid_encoding? ? [text, nil] : [nil, "is not UTF-8 text"]
        end
      rescue SystemCallError => e
        [nil, "could not be read (#{e.message.sub(/ @ .*/, "")})"]
      end

      def unseen(source, line, what)
        "#{source.rel} line #{line} (#{source.line(line).strip}) declares gems through #{what}, which loadscan install " \
          "does not read: it cannot tell whether every boot's bundle has loadscan; #{BY_HAND_GEMFILE}"
      end

      # Every call in `node` (a call wrapped in `(...)` or a block once, with its arguments and block).
      def each_call(node, inner = false, &block)
        return unless node.is_a?(Array)

        call = RubySource.call(node) unless inner
        yield call if call
        wrapper = %i[method_add_arg method_add_block].include?(node[0])
        node.each_with_index { |child, i| each_call(child, wrapper && i == 1, &block) }
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
