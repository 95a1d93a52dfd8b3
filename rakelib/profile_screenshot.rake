# frozen_string_literal: true

desc "Take doc/profile-rails.png: the boot profile's page of the Rails app's production boot, in headless Chromium"
task "profile:screenshot" => :compile do
  require "json"
  require "open3"
  require_relative "../fixtures/rails_app"
  require_relative "../test/support/profile_app"
  abort(Fixtures::RailsApp.missing) if Fixtures::RailsApp.missing
  Dir.mktmpdir("loadscan-screenshot") do |dir|
    app = Fixtures::RailsApp.generate(out: File.join(dir, "app"))
    root = app[:root]
    out = File.join(dir, "profile")
    env = app[:env].merge("RAILS_ENV" => "production", "SECRET_KEY_BASE_DUMMY" => "1")
    text, status = Open3.capture2e(env, RbConfig.ruby, File.expand_path("../exe/loadscan", __dir__), "profile", "--output", out, chdir: root)
    abort("loadscan profile failed:\n#{text}") unless status.success?
    puts text
    png = File.expand_path("../doc/profile-rails.png", __dir__)
    Loadscan::TestSupport::ProfileApp.chromium_dom("#{out}.html", screenshot: png, size: "1280,1100") or abort("no Chromium (bin/setup installs it)")
    puts "wrote #{png}"
  end
end
