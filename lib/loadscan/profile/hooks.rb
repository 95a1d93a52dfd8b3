# frozen_string_literal: true

module Loadscan
  class Profile
    # Prepended to Kernel (and `require` to Kernel's singleton class) the first time a profile
    # starts, and never taken out: each method is one branch when no profile records, then the
    # method it stands in front of. They stand in front of whatever is bound in Kernel (RubyGems,
    # Bootsnap, Zeitwerk, loadscan's decorator), so they see each feature as the program wrote
    # it, autoloads too (Ruby's autoload calls `require` by name).
    #
    # While a profile records, they add a frame of their own to backtraces through `require`.
    # `require_relative` is resolved here, against the file of its caller, and Ruby's own then
    # gets the absolute path (it would resolve against this file): that costs a caller lookup
    # per require_relative once a profile has run in the process (`Loadscan.profile`).
    module Hooks
      class << self
        def attach
          return if @attached

          Kernel.prepend(self)
          Kernel.singleton_class.prepend(Singleton)
          @attached = true
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
      end

      private

      def require(feature)
        profile = Hooks.recording(feature) or return super
        Profile::Rails.check
        profile.measure(:require, feature.to_s) { super }
      end

      # Ruby's own would resolve against this file (its caller's): it gets the path resolved
      # here against the file of this call's caller, as Ruby resolves it, profile or not.
      def require_relative(feature)
        base = Hooks.base(caller_locations(1, 1).first) or raise LoadError, "cannot infer basepath"

        path = File.expand_path(feature, File.dirname(base)) # to_path or to_str, as Ruby's
        profile = Hooks.recording(feature) or return super(path)
        profile.measure(:require_relative, feature.to_s) { super(path) }
      end

      def load(file, *wrap)
        profile = Hooks.recording(file) or return super
        profile.measure(:load, file.to_s) { super }
      end

      # `Kernel.require` (RubyGems and Bundler call it so).
      module Singleton
        def require(feature)
          profile = Hooks.recording(feature) or return super
          profile.measure(:require, feature.to_s) { super }
        end
      end
    end

    # Rails' initializers as entries: each `Rails::Initializable::Initializer#run` (bumbler's
    # `--initializers`), and each file of config/initializers under the
    # `load_config_initializer.railties` notification. Installed once Rails' initializers are
    # defined (checked at each `require` while a profile records, until then).
    module Rails
      class << self
        def check
          return if @installed || !defined?(::Rails::Initializable::Initializer)

          @installed = true
          ::Rails::Initializable::Initializer.prepend(Run)
          ::ActiveSupport::Notifications.subscribe("load_config_initializer.railties", Listener.new) if defined?(::ActiveSupport::Notifications)
        rescue StandardError => e
          Profile.warn_once(:rails, "the profile could not time Rails' initializers: #{e.message}")
        end
      end

      # Times one initializer: named for its owner and name, filed under its block's file.
      module Run
        def run(*args)
          profile = Profile.current
          return super unless profile && Thread.current.equal?(profile.thread)

          profile.measure(:initializer, "#{context_class}: #{name}", block&.source_location&.first) { super }
        end
      end

      # `load_config_initializer.railties`: the file's entry, around its `load`.
      class Listener
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
