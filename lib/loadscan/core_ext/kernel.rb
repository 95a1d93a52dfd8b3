# frozen_string_literal: true

# loadscan's place in `require`: in front of Ruby's own C `require` (the function that searches
# `$LOAD_PATH`), wherever it is bound. What is bound where depends on what was set up, and in
# which order:
#
#   RubyGems alone             Kernel#require (RubyGems) → Kernel#gem_original_require (C)
#   bundler/setup, RubyGems < 3.5
#                              Kernel#require (C), Kernel.require (C), Kernel#gem_original_require (C)
#   bundler/setup, Ruby 3.3 and 3.4 (RubyGems 3.5, 3.6)
#                              Kernel#require (bundled_gems) → Kernel#no_warning_require (RubyGems)
#                              → Kernel#gem_original_require (C); Kernel.require (bundled_gems)
#                              → Kernel.no_warning_require (C)
#   Bootsnap, Zeitwerk         Kernel#require (theirs) → Kernel#require_without_bootsnap /
#                              zeitwerk_original_require (whatever was there before)
#   --disable-gems             Kernel#require (C), Kernel.require (C)
#   Ruby 3.4+, after the first `Ractor.new`
#                              a module prepended to Kernel (`<RactorRequire>`) whose #require
#                              sends a non-main Ractor's require to the main Ractor, which calls
#                              `require` again; in the main Ractor it calls `super`: Kernel's own
#                              bindings above, unchanged
#
# So loadscan takes the place of *every* binding of the C function in Kernel and in Kernel's
# singleton class, whatever its name, and watches both for new ones (`bundler/setup` rebinding
# `require` after loadscan was set up): whatever stands in front — RubyGems with its activation
# and `LoadError` retry, Bundler, Bootsnap, Zeitwerk — still sees each feature as written, and
# whatever ends up calling Ruby's search calls loadscan instead.
#
# The decorator, `Loadscan::Native::Decorator#require`, is itself a C function (ext/loadscan/
# src/decorator.rs): it resolves the feature from the index and hands the absolute path to
# Ruby's C `require`, so Ruby still does the loading, the locking, `$LOADED_FEATURES` and the
# `true`/`false` result, and backtraces look as without loadscan. When Ruby itself would answer
# `false` without loading anything, it answers `false` at once. Where the index has no exact
# answer (not found, already loaded under another spelling, absolute or `./` paths, non-String
# arguments) the feature goes to Ruby's C `require` untouched.
#
# Deliberately not intercepted: `require_relative` and `load` (they never search `$LOAD_PATH`
# by feature name). `autoload` reaches `Kernel#require` and is served through it.
require_relative "../kernel_watch"

module Loadscan
  # Keeps loadscan in front of Ruby's C `require` (see the top of this file).
  module CoreExt
    DECORATOR = Native::Decorator.instance_method(:require)
    OWNERS = [Kernel, Kernel.singleton_class].freeze

    class << self
      # Puts loadscan in place of every binding of Ruby's C `require` and starts watching Kernel.
      # Returns false when Ruby's C `require` is bound nowhere (then nothing changed).
      def attach
        taken = OWNERS.sum { |owner| c_bindings(owner).each { |name| take(owner, name) }.size }
        KernelWatch.listen(method(:method_added))
        @attached = true
        taken.positive?
      end

      # Whether a plain `require` (and `Kernel.require`) reach loadscan now: requires the probe
      # feature through each and counts what arrives. Nothing is searched or loaded either way.
      def engaged?
        @attached == true && probe == :reached
      end

      # Called by KernelWatch when a method named `name` was (re)defined in `owner`.
      def method_added(owner, name)
        return if !@attached || @busy

        @busy = true # taking a binding defines methods too
        begin
          take(owner, name) if c_binding?(owner, name)
          check if name == :require || @unsure
        ensure
          @busy = false
        end
      end

      # Warns once when `require` no longer reaches loadscan, naming what stands in front; and
      # once when Bootsnap's load path cache stands in front (it answers most requires itself, so
      # loadscan only sees what it leaves). A probe that fails on the way (a library halfway
      # through redefining `require`, as Ruby 3.3's bundled_gems is between its two aliases) is
      # no verdict: the check runs again at the next definition in Kernel, and at exit.
      def check
        if Kernel.private_method_defined?(:require_without_bootsnap)
          Warnings.once(:bootsnap, "Bootsnap's load path cache answers requires before loadscan: pass " \
                                   "`load_path_cache: false` to Bootsnap.setup (its compile cache works with loadscan)")
        end
        result = probe
        @unsure = result == :unsure
        return unless result == :bypassed

        Warnings.once(:disengaged, "`require` no longer reaches loadscan: #{require_chain} does not " \
                                   "call the require it replaced; set loadscan up after it")
      end

      # Checks again if the last probe was no verdict (at exit).
      def recheck
        check if @attached && @unsure
      end

      private

      # Names in `owner` bound to Ruby's C `require`, or to the decorator (which is a C function
      # named `require` too: taking it again changes nothing).
      def c_bindings(owner)
        (owner.private_instance_methods(false) + owner.public_instance_methods(false)).select do |name|
          c_binding?(owner, name)
        end
      end

      def c_binding?(owner, name)
        m = own_method(owner, name)
        !m.nil? && m.original_name == :require && m.source_location.nil?
      end

      # `owner`'s own method `name`, past the modules prepended to `owner` (Ruby 3.4's
      # `<RactorRequire>`, see the top of this file), or nil when `owner` has none.
      def own_method(owner, name)
        m = owner.instance_method(name)
        unless m.owner == owner
          prepended = prepended_to(owner)
          m = m.super_method while m && prepended.include?(m.owner)
        end
        m if m&.owner == owner
      rescue NameError
        nil
      end

      # The `require` methods a plain `require` runs through in Kernel, outermost first:
      # `Kernel#require (app.rb:3)`, or `<RactorRequire>#require (<internal:ractor>:909) →
      # Kernel#require (a C function)` behind a prepended module.
      def require_chain
        chain = []
        m = Kernel.instance_method(:require)
        while m
          chain << "#{m.owner.inspect}#require (#{m.source_location&.join(":") || "a C function"})"
          break if m.owner == Kernel

          m = m.super_method
        end
        chain.join(" → ")
      end

      # Replaces `owner`'s `name` by the decorator, keeping its visibility. Without the warning
      # Ruby gives under -W for a replaced C function: stock Ruby prints none.
      #
      # Behind a module prepended to `owner` that defines `name` too (Ruby 3.4's `<RactorRequire>`),
      # Ruby 3.4 invalidates its method caches for the prepended module's method only, so its
      # `super` (already called: every require since the first `Ractor.new`) would keep reaching
      # the replaced C function. Those definitions step aside while the binding is replaced (and
      # its visibility set), and are put back, the same methods: then the caches see the change.
      def take(owner, name)
        visibility = owner.private_instance_methods(false).include?(name) ? :private : :public
        aside = prepended_definitions(owner, name)
        verbose, $VERBOSE = $VERBOSE, nil
        begin
          aside.each { |mod, _, _| mod.send(:remove_method, name) }
          owner.send(:define_method, name, DECORATOR)
          owner.send(visibility, name)
        ensure
          aside.each { |mod, method, vis| mod.send(:define_method, name, method) && mod.send(vis, name) }
          $VERBOSE = verbose
        end
      end

      # The modules prepended to `owner`, outermost first.
      def prepended_to(owner) = owner.ancestors.take_while { |mod| !mod.equal?(owner) }

      # `[module, method, visibility]` for each module prepended to `owner` that defines `name`.
      def prepended_definitions(owner, name)
        prepended_to(owner).filter_map do |mod|
          if mod.private_method_defined?(name, false)
            [mod, mod.instance_method(name), :private]
          elsif mod.method_defined?(name, false)
            [mod, mod.instance_method(name), mod.protected_method_defined?(name, false) ? :protected : :public]
          end
        end
      end

      # :reached when the probe arrives through both `require` and `Kernel.require`; :bypassed
      # when one of them answered it without loadscan (Ruby's search, or a cache in front, raised
      # its LoadError for the probe); :unsure when something else went wrong on the way.
      def probe
        results = [TOPLEVEL_BINDING.receiver, Kernel].map do |receiver|
          before = Native.probes
          begin
            receiver.send(:require, Native::PROBE)
          rescue LoadError => e
            next :bypassed if e.path == Native::PROBE
          rescue StandardError, ScriptError
            nil
          end
          Native.probes > before ? :reached : :unsure
        end
        return :bypassed if results.include?(:bypassed)

        results.all?(:reached) ? :reached : :unsure
      end
    end
  end
end
