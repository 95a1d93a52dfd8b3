# frozen_string_literal: true

module Loadscan
  # The compile cache (README, "Compile cache"): Ruby asks `RubyVM::InstructionSequence.load_iseq`
  # before it compiles a file it loads; loadscan answers from `iseq.bin` in its cache dir (the
  # extension: ext/loadscan/src/compile_cache.rs) with the instruction sequence Ruby compiled for
  # the same contents, paths and compile settings, or nil (Ruby compiles, and that compile is
  # kept for the next boot). What is Ruby's here: the TracePoint that catches Ruby's own compile
  # on a miss, the digest of the compile settings, and the check at exit of whether each new
  # compile warns (a file that warns in the current warning state is never served: the
  # warnings are Ruby's to print).
  module CompileCache
    # Where Ruby's hook sits: a module of its own in front of any other (Bootsnap's too, which
    # does not call `super`), made anew each time something is prepended after it.
    module Watch
      def prepend(*modules)
        super.tap { CompileCache.to_front(self) unless modules.any? { |m| m.is_a?(Front) } }
      end
    end

    # A module holding the extension's `load_iseq`, in front of the singleton class.
    class Front < Module
      def initialize
        super
        define_method(:load_iseq, Native::CompileCache.instance_method(:load_iseq))
        define_method(:compile_option=) do |options|
          super(options).tap { CompileCache.update_flags }
        end
      end
    end

    class << self
      # Puts the hook in place and opens the cache (`config.cache_dir`; nil: nothing is kept).
      # True when it is in place.
      def start(config)
        return false unless supported?

        @config = config
        tracepoint = TracePoint.new(:script_compiled) { |tp| Native.compile_cache_compiled(tp.instruction_sequence) }
        warning = Native.compile_cache_start(config.cache_dir, env_key(config), tracepoint, categories)
        Warnings.once(:cache, warning) if warning # (one warning for a damaged cache dir: the index's or this)
        update_flags
        singleton = RubyVM::InstructionSequence.singleton_class
        to_front(singleton)
        singleton.singleton_class.prepend(Watch) unless singleton.singleton_class.include?(Watch)
        @started = true
      end

      def started? = @started == true

      # A Ruby whose instruction sequences can be dumped and loaded, and whose loads ask
      # `load_iseq` (CRuby).
      def supported?
        defined?(RubyVM::InstructionSequence) && RubyVM::InstructionSequence.respond_to?(:load_from_binary) &&
          RUBY_ENGINE == "ruby"
      end

      # Prepends a fresh hook to `singleton` (RubyVM::InstructionSequence's singleton class).
      def to_front(singleton)
        singleton.prepend(Front.new)
      end

      # The compile settings' digest, again (at start and whenever `compile_option=` is called):
      # the options, the parser, the build (RUBY_REVISION, RUBY_PLATFORM: the env key's).
      def update_flags
        text = "#{RubyVM::InstructionSequence.compile_option.inspect} #{parser} #{RUBY_REVISION} #{RUBY_PLATFORM}"
        Native.compile_cache_flags = Native.unseeded_hash(text).to_i(16)
      end

      # What Ruby compiles with: Prism or parse.y.
      def parser
        RUBY_DESCRIPTION.include?("+PRISM") ? "prism" : "parse.y"
      end

      # The figures: hits, misses, bypasses, bytes_read, bytes_written, entries.
      def stats
        started? ? Native.compile_cache_stats : nil
      end

      # At exit: which of this boot's compiles warn nothing in the warning state they were
      # compiled in, then the write (under the index's write rule). :written, :clean, :skipped or
      # :failed (warned once).
      def finish
        return :skipped unless started?

        Native.compile_cache_stop
        pending = Native.compile_cache_pending
        silent = pending.empty? ? [] : quiet_compiles(pending)
        result = Native.compile_cache_finish(silent)
        return result if result.is_a?(Symbol)

        Warnings.once(:compile_cache_write, result)
        :failed
      end

      # A blob of the file failed its CRC (called by the extension, on the load that found it):
      # Ruby compiles that file, and the file is written again at exit without it.
      def damaged(path)
        Warnings.guarded(:compile_cache_damage, "the warning") do
          # (the kind of a damaged cache dir: one warning whichever of its files are damaged)
          Warnings.once(:cache, "the compile cache's entry for #{path} is damaged (its CRC); compiling instead")
        end
        nil
      end

      private

      def env_key(config) = "iseq #{config.env_key}"

      # The Warning categories of this Ruby (four have a bit in a warning state; a load while
      # another is enabled is left to Ruby).
      def categories
        return Warning.categories if Warning.respond_to?(:categories)

        %i[deprecated experimental performance].select do |c|
          Warning[c]
          true
        rescue ArgumentError
          false
        end
      end

      # For each `[path, realpath, state]`: whether compiling the file's contents (as they were
      # when it was loaded) in that warning state warns nothing, with Warning.warn caught
      # meanwhile (nothing reaches the program: the boot is over).
      def quiet_compiles(pending)
        cats = categories.first(4)
        count = 0
        capture_warnings(-> { count += 1 }) do
          pending.each_with_index.map do |(path, realpath, state), i|
            source = Native.compile_cache_source(i)
            next false unless source

            before = count
            with_state(state, cats) { compile(source, path, realpath) } && count == before
          end
        end
      end

      def compile(source, path, realpath)
        source.force_encoding(Encoding::UTF_8)
        iseq = RubyVM::InstructionSequence
        parser == "prism" && iseq.respond_to?(:compile_prism) && RUBY_VERSION < "3.4" ? iseq.compile_prism(source, path, realpath, 1) : iseq.compile(source, path, realpath, 1)
        true
      rescue ScriptError, StandardError
        false
      end

      def with_state(state, cats)
        verbose = $VERBOSE
        saved = cats.map { |c| Warning[c] }
        $VERBOSE = [nil, false, true][state & 3]
        cats.each_with_index { |c, i| Warning[c] = state[i + 2] == 1 }
        yield
      ensure
        $VERBOSE = verbose
        cats.zip(saved).each { |c, v| Warning[c] = v }
      end

      def capture_warnings(counter)
        singleton = Warning.singleton_class
        own = singleton.instance_methods(false).include?(:warn) || singleton.private_instance_methods(false).include?(:warn)
        saved = singleton.instance_method(:warn)
        singleton.define_method(:warn) { |*_args, **_opts| counter.call && nil }
        yield
      ensure
        if own
          singleton.define_method(:warn, saved)
        else
          singleton.send(:remove_method, :warn)
        end
      end
    end
  end
end
