# frozen_string_literal: true

module Loadscan
  class Profile
    # Put in place of Kernel's `require`, `require_relative` and `load` (and `Kernel.require`)
    # the first time a profile starts, each keeping the method it replaced under another name
    # (`loadscan_profile_require`, …) and never taken out: each is one branch when no profile
    # records, then the method it replaced. Defined in Kernel itself, as RubyGems, Bootsnap and
    # Zeitwerk define theirs (not prepended: Ruby's bundled_gems aliases Kernel's `require`, and an
    # alias of a prepended method finds no `super`), so whatever is defined after it calls it in
    # turn. They see each feature as what stands in front passes it on, autoloads too (Ruby's
    # autoload calls `require` by name).
    #
    # While a profile records, they add a frame of their own to backtraces through `require`.
    # `require_relative` is resolved here, against the file of its caller, and Ruby's own then
    # gets the absolute path (it would resolve against this file): that costs a caller lookup
    # per require_relative once a profile has run in the process (`Loadscan.profile`).
    module Hooks
      # What each replaced method is kept as.
      KEPT = { require: :loadscan_profile_require, require_relative: :loadscan_profile_require_relative,
               load: :loadscan_profile_load }.freeze

      class << self
        def attach
          return if @attached

          @attached = true
          KEPT.each_key { |name| replace(Kernel, name, Instance) }
          replace(Kernel.singleton_class, :require, Singleton)
          Kernel.singleton_class.prepend(Watch)
        end

        # Called by Watch when Kernel's `name` was (re)defined in `owner` (Kernel, or its
        # singleton class): one of ours replaced by another's (Bundler restores RubyGems'
        # originals, loadscan puts its decorator in place of Ruby's C require) is put back in
        # front of it.
        def redefined(owner, name)
          return if @busy || !KEPT.key?(name) || (owner != Kernel && name != :require)
          return if owner.instance_method(name).source_location&.first == __FILE__

          replace(owner, name, owner == Kernel ? Instance : Singleton)
        end

        # The file `require_relative` resolves against, as Ruby's does: the caller's real path;
        # else (code eval'd with a file name, `-e`) the path it was given; none in eval'd code
        # given no file name (`(eval)`, `(eval at file:3)`).
        def base(location)
          return unless location

          location.absolute_path || (location.path unless location.path.start_with?("(eval)", "(eval at "))
        end

        # Whether this call is one to time: a profile records in this thread, and it is not
        # loadscan's probe (CoreExt's check that `require` reaches it).
        def recording(feature)
          profile = Profile.current
          return unless profile && Thread.current.equal?(profile.thread)
          return if defined?(Loadscan::Native::PROBE) && Loadscan::Native::PROBE == feature

          profile
        end

        private

        # `owner`'s `name` becomes `from`'s, the one there kept as KEPT[name], visibility kept.
        def replace(owner, name, from)
          @busy = true
          verbose, $VERBOSE = $VERBOSE, nil # no "method redefined" under -w: stock Ruby prints none
          visibility = owner.private_method_defined?(name) ? :private : :public
          owner.send(:alias_method, KEPT.fetch(name), name)
          owner.send(:define_method, name, from.instance_method(name))
          owner.send(visibility, name, KEPT.fetch(name))
        ensure
          $VERBOSE = verbose
          @busy = false
        end
      end

      # Prepended to Kernel's singleton class: hears of every method (re)defined in Kernel or on
      # Kernel itself (as Loadscan::CoreExt::Watch).
      module Watch
        private

        def method_added(name)
          super
          Hooks.redefined(Kernel, name)
        end

        def singleton_method_added(name)
          super
          Hooks.redefined(Kernel.singleton_class, name)
        end
      end

      # Kernel's instance methods.
      module Instance
        def require(feature)
          profile = Hooks.recording(feature) or return loadscan_profile_require(feature)
          Profile::Phases.check
          profile.measure(:require, feature.to_s) { loadscan_profile_require(feature) }
        end

        # Ruby's own would resolve against this file (its caller's): it gets the path resolved
        # here against the file of this call's caller, as Ruby resolves it, profile or not.
        def require_relative(feature)
          base = Hooks.base(caller_locations(1, 1).first) or raise LoadError, "cannot infer basepath"
          path = File.expand_path(feature, File.dirname(base)) # to_path or to_str, as Ruby's
          profile = Hooks.recording(feature) or return loadscan_profile_require_relative(path)
          profile.measure(:require_relative, feature.to_s) { loadscan_profile_require_relative(path) }
        end

        def load(file, *wrap)
          profile = Hooks.recording(file) or return loadscan_profile_load(file, *wrap)
          path = File.expand_path(file) if file.respond_to?(:to_str) || file.respond_to?(:to_path) # as loaded from here
          profile.measure(:load, file.to_s, path) { loadscan_profile_load(file, *wrap) }
        end
      end

      # `Kernel.require` (RubyGems and Bundler call it so).
      module Singleton
        def require(feature)
          profile = Hooks.recording(feature) or return loadscan_profile_require(feature)
          profile.measure(:require, feature.to_s) { loadscan_profile_require(feature) }
        end
      end
    end

    # The boot's phases as entries: Bundler's `setup` (the Gemfile's resolution) and `require`
    # (the gems it loads are under it), and Rails' initializers: each
    # `Rails::Initializable::Initializer#run` (bumbler's `--initializers`), and each file of
    # config/initializers under the `load_config_initializer.railties` notification. Each is
    # hooked once defined (checked at each `require` while a profile records, until then).
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
