# frozen_string_literal: true

require_relative "../../kernel_watch"

module Loadscan
  class Profile
    # Put in place of Kernel's `require`, `require_relative` and `load` (and `Kernel.require`)
    # the first time a profile starts, each keeping the method it replaced under a name of its
    # own (`loadscan_profile_require_1`, …), and never taken out: each is one branch when no
    # profile records, then the method it replaced. Defined in Kernel itself, as RubyGems,
    # Bootsnap and Zeitwerk define theirs, so whatever is defined later calls it in turn; and
    # put back in front when something rebinds one of the names (KernelWatch): Bundler restoring
    # RubyGems' originals, loadscan taking Ruby's C require, Ruby's bundled_gems aliasing
    # `require` and defining its own. Each copy calls the method it replaced by that method's own
    # name (one aliased elsewhere still does), where loadscan can take it when it is Ruby's C
    # require; a call that passes through two copies is one entry (Profile#open_entry).
    #
    # They see each feature as what stands in front passes it on, autoloads too (Ruby's
    # autoload calls `require` by name). A hook called by another name (an alias another
    # library took of it, as Bootsnap's `require_without_bootsnap`: its `require` resolves the
    # feature, then calls the one it wrapped with the path) is that library passing on a call
    # already timed: no entry of its own. While a profile records, they add a frame of their own
    # to backtraces through `require`. `require_relative` is resolved here, against the file of
    # its caller, and Ruby's own then gets the absolute path (it would resolve against this
    # file): that costs a caller lookup per require_relative once a profile has run in the
    # process (`Loadscan.profile`).
    module Hooks
      NAMES = %i[require require_relative load].freeze
      SOURCE = __FILE__

      class << self
        def attach
          return if @attached

          @attached = true
          NAMES.each { |name| replace(Kernel, name) }
          replace(Kernel.singleton_class, :require)
          KernelWatch.listen(method(:redefined))
        end

        # Called by KernelWatch when Kernel's `name` was (re)defined in `owner` (Kernel, or its
        # singleton class): one of ours replaced by another's is put back in front of it.
        def redefined(owner, name)
          return if @busy || !NAMES.include?(name) || (owner != Kernel && name != :require)
          return if owner.instance_method(name).source_location&.first == __FILE__

          replace(owner, name)
        end

        # The file `require_relative` resolves against, as Ruby's does: the caller's real path;
        # else (code eval'd with a file name, `-e`) the path it was given; none in eval'd code
        # given no file name (`(eval)`, `(eval at file:3)`).
        def base(location)
          return unless location

          location.absolute_path || (location.path unless location.path.start_with?("(eval)", "(eval at "))
        end

        private

        # `owner`'s `name` becomes a hook, the method there kept under a new name, visibility
        # kept.
        def replace(owner, name)
          @busy = true
          @count = (@count || 0) + 1
          kept = :"loadscan_profile_#{name}_#{@count}"
          verbose, $VERBOSE = $VERBOSE, nil # no "method redefined" under -w: stock Ruby prints none
          visibility = owner.private_method_defined?(name) ? :private : :public
          owner.send(:alias_method, kept, name)
          owner.module_eval(hook(name, kept), __FILE__, __LINE__)
          owner.send(visibility, name, kept)
        ensure
          $VERBOSE = verbose
          @busy = false
        end

        # The hook for `name`, calling `kept`: a method's source (a method defined from a string
        # is a call cheaper than one from a block, and calls `kept` directly). It times the call
        # in its own frame (Profile#open_entry, Profile#leave), as Profile#measure would with a
        # block: the frame under `kept` is the hook's, named as the method it stands for.
        def hook(name, kept)
          case name
          when :require
            timed("require(feature)", "#{kept}(feature)", ":require, feature")
          when :require_relative
            timed("require_relative(feature)", "#{kept}(path)", ":require_relative, feature", <<~RUBY)
              base = ::Loadscan::Profile::Hooks.base(caller_locations(1, 1).first) or raise ::LoadError, "cannot infer basepath"
              path = ::File.expand_path(feature, ::File.dirname(base)) # to_path or to_str, as Ruby's
            RUBY
          else
            # The file as loaded from here, expanded only when timed.
            timed("load(file, *wrap)", "#{kept}(file, *wrap)",
                  ":load, file, (::File.expand_path(file) if file.respond_to?(:to_str) || file.respond_to?(:to_path))")
          end
        end

        # A hook's source: `before` (locals the call needs), then `call`, timed as an entry when a
        # profile records and Profile#open_entry (given `entry`) opens one: else one branch more.
        def timed(signature, call, entry, before = "")
          <<~RUBY
            def #{signature}
              #{before}
              profile = ::Loadscan::Profile.current or return #{call}
              return #{call} unless __callee__ == :#{signature[/\A\w+/]} # called by an alias: a wrapper's call of the method it wraps
              index = profile.open_entry(#{entry}) or return #{call}
              loaded_before = $LOADED_FEATURES.size
              finished = false
              result = #{call}
              finished = true
              result
            ensure
              profile.leave(index, finished, result, loaded_before) if index
            end
          RUBY
        end
      end

    end

    # The boot's phases as entries: Bundler's `setup` (the Gemfile's resolution) and `require`
    # (the gems it loads are under it), and Rails' initializers: each
    # `Rails::Initializable::Initializer#run` (bumbler's `--initializers`), and each file of
    # config/initializers under the `load_config_initializer.railties` notification. Each is
    # hooked once defined (checked after each file a profile records, until then).
    module Phases
      class << self
        def check
          bundler unless @bundler || !defined?(::Bundler)
          rails unless @rails || !defined?(::Rails::Initializable::Initializer)
        end

        private

        def bundler
          @bundler = true
          ::Bundler.singleton_class.prepend(Bundler)
        end

        def rails
          @rails = true
          ::Rails::Initializable::Initializer.prepend(Initializer)
          ::ActiveSupport::Notifications.subscribe("load_config_initializer.railties", ConfigInitializer.new) if defined?(::ActiveSupport::Notifications)
        rescue StandardError => e
          Profile.warn_once(:rails, "the profile could not time Rails' initializers: #{e.message}")
        end
      end

      # `Bundler.setup` and `Bundler.require`.
      module Bundler
        def setup(*)
          profile = Profile.current
          return super unless profile && Thread.current.equal?(profile.thread)

          profile.measure(:phase, "Bundler.setup") { super }
        end

        def require(*)
          profile = Profile.current
          return super unless profile && Thread.current.equal?(profile.thread)

          profile.measure(:phase, "Bundler.require") { super }
        end
      end

      # Times one initializer: named for its owner and name, filed under its block's file.
      module Initializer
        def run(*args)
          profile = Profile.current
          return super unless profile && Thread.current.equal?(profile.thread)

          profile.measure(:initializer, "#{context_class}: #{name}", block&.source_location&.first) { super }
        end
      end

      # `load_config_initializer.railties`: the file's entry, around its `load`.
      class ConfigInitializer
        def start(_name, _id, payload)
          profile = Profile.current
          return unless profile && Thread.current.equal?(profile.thread)

          file = payload[:initializer].to_s
          @open = profile.enter(:initializer, file.sub(%r{\A#{Regexp.escape(Dir.pwd)}/}, ""), file)
        end

        def finish(_name, _id, _payload)
          profile = Profile.current
          return unless profile && @open

          profile.leave(@open)
          @open = nil
        end
      end
    end
  end
end
