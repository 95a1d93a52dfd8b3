# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/rails_app"

# `rake loadscan:clear` and `tmp:clear` in a real Rails app (Rails 7.2 from `rails new` on 3.3 and
# 3.4, Rails 6.1 on Debian's 3.1: test/support/rails_app.rb), with loadscan in the Gemfile as the
# README says: `require: "loadscan/railtie"`.
class RailsTasksTest < Minitest::Test
  App = Loadscan::TestSupport::RailsApp
  include App::NeedsRails

  def rails(app, *args, env: {})
    run = run_ruby(command: [RbConfig.ruby, "bin/rails", *args], loadscan: nil, chdir: app, timeout: 120,
                   env: App.env(app).merge("SECRET_KEY_BASE" => "x" * 64, "LOADSCAN_CACHE_DIR" => nil).merge(env))
    assert run.success?, "bin/rails #{args.join(" ")} failed:\n#{run.stderr}"
    [run.stdout, run.stderr]
  end

  def cache_files(dir)
    %w[loadscan.cache last_boot.json].select { |f| File.file?(File.join(dir, f)) }
  end

  def test_loadscan_clear_and_tmp_clear
    Dir.mktmpdir("loadscan-rails-tasks") do |dir|
      app = rails_app!(App.app(File.realpath(dir)))
      default = File.join(app, "tmp/cache/loadscan")

      out, = rails(app, "-T", "loadscan")
      assert_match(/^(bin\/)?rails loadscan:clear\s+#\s+Delete loadscan's cache/, out)

      rails(app, "runner", "nil")
      assert_equal %w[loadscan.cache last_boot.json], cache_files(default)
      out, err = rails(app, "loadscan:clear")
      assert_empty cache_files(default), "#{out}\n#{err}"
      assert_includes out, "removed #{default}/loadscan.cache"

      rails(app, "runner", "nil")
      assert_equal %w[loadscan.cache last_boot.json], cache_files(default)
      rails(app, "tmp:clear")
      assert_empty cache_files(default)

      # A cache dir outside tmp/ is cleared by tmp:clear too.
      elsewhere = File.join(dir, "elsewhere")
      rails(app, "runner", "nil", env: { "LOADSCAN_CACHE_DIR" => elsewhere })
      assert_equal %w[loadscan.cache last_boot.json], cache_files(elsewhere)
      rails(app, "tmp:clear", env: { "LOADSCAN_CACHE_DIR" => elsewhere })
      assert_empty cache_files(elsewhere)
    end
  end
end
