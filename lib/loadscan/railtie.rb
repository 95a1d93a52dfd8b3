# frozen_string_literal: true

require_relative "../loadscan"

module Loadscan
  # Rails' rake tasks for loadscan: `loadscan:clear`, also run by `tmp:clear`. Loaded by
  # Bundler.require in config/application.rb with `gem "loadscan", require: "loadscan/railtie"`
  # (config/boot.rb has set loadscan up already, before Rails was loaded).
  # Outside Rails (a Gemfile shared with a plain script) there is nothing to add.
  if defined?(::Rails::Railtie)
    class Railtie < ::Rails::Railtie
      rake_tasks { load File.expand_path("tasks/loadscan.rake", __dir__) }
    end
  end
end
