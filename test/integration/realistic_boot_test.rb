# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../../fixtures/debian_tree"
require_relative "../../fixtures/app"

# Real boots: `require "rails/all"` plus an app over one load-path entry per Debian ruby-*
# package (360 of them), and a generated 200-gem Bundler-like tree with an app. loadscan must
# end with the same $LOADED_FEATURES and require results as stock Ruby, and answer most
# requires from its index.
class RealisticBootTest < Minitest::Test
  # One set per Ruby: a run on one Ruby does not regenerate the trees another is booting.
  FIXTURES = File.join(Loadscan::TestSupport::ROOT, "tmp", "test-fixtures", "ruby-#{RUBY_VERSION[/\A\d+\.\d+/]}")
  DEBIAN_VENDORDIR = "/usr/lib/ruby/vendor_ruby"

  def test_rails_boot_over_debian_packages
    # Debian's ruby-* packages belong to Debian's Ruby (3.1): their files are found through its
    # vendor dirs and gem specs, their extensions link its libruby. Another Ruby sees only part of
    # them: on 3.3 the stock boot itself fails (Mail::TestMailer undefined), as actionmailer's `mail`
    # is found on 3.1 only by activating Debian's mail gemspec, on 3.1's GEM_PATH, which puts
    # Debian's vendor_ruby back on $LOAD_PATH.
    unless RbConfig::CONFIG["vendordir"] == DEBIAN_VENDORDIR
      skip "Debian's ruby-* packages are for Debian's Ruby only, not Ruby #{RUBY_VERSION} (#{RbConfig.ruby})"
    end
    missing = Fixtures::DebianTree.missing_packages
    assert_empty missing, "run bin/setup: Debian packages missing"
    out = File.join(FIXTURES, "debian")
    Fixtures::DebianTree.generate(out: out)
    stock, fast, = assert_boots_like_stock(File.join(out, "boot.rb"))
    assert_operator stock["load_path"].size, :>=, 150
    assert_operator fast["stats"][:hits], :>, 800, "most of the ~1200 requires should be answered by the index: #{fast["stats"]}"
    # Served from the cache: no entry scanned whole (directories written within a second of the
    # cold boot's scan may be listed again — the racy window — which is not a whole scan).
    assert_equal 0, fast["stats"][:roots_scanned], "the warm boot is served from the cache: #{fast["stats"]}"
    assert_operator fast["stats"][:roots_from_cache] + fast["stats"][:roots_refreshed], :>, 300
    assert_operator stock["loaded_features"].count { |f| f.start_with?(out) }, :>, 500
    assert_equal stock["load_path"], fast["load_path"], "loadscan must not rewrite $LOAD_PATH"
  end

  def test_generated_gem_tree_and_app
    out = File.join(FIXTURES, "app-200")
    Fixtures::App.generate(out: out, gem_tree: Fixtures::GemTree.generate(out: File.join(out, "gems-tree"), gems: 200, seed: 7), seed: 7)
    stock, fast, = assert_boots_like_stock(File.join(out, "boot.rb"))
    assert_operator stock["results"].size, :>, 100
    assert_operator fast["stats"][:hits], :>, fast["stats"][:deferred], fast["stats"].inspect
  end
end
