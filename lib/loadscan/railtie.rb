# frozen_string_literal: true

module Loadscan
  # Rails' rake tasks for loadscan: `loadscan:clear`, also run by `tmp:clear`; and the end of the
  # boot at after_initialize (Loadscan.end_boot: GC deferred during the boot runs again from there,
  # README "GC during the boot", and Bootsnap's variable is taken back). Loaded by Bundler.require
  # in config/application.rb with `gem "loadscan", require: "loadscan/railtie"` (config/boot.rb has
  # set loadscan up already, before Rails was loaded). Outside Rails (a Gemfile shared with a plain
  # script) there is nothing to add. Loads nothing else: the task loads loadscan when it runs.
  if defined?(::Rails::Railtie)
    class Railtie < ::Rails::Railtie
      rake_tasks { load File.expand_path("tasks/loadscan.rake", __dir__) }
      config.after_initialize { Loadscan.end_boot(:rails) if Loadscan.respond_to?(:end_boot) }
    end
  end
end
