# frozen_string_literal: true

require_relative "../test_helper"
require "etc"

# What a listing cannot vouch for, compared with stock Ruby in separate processes, within one
# process and across boots with a real cache dir: a symlink whose target appears after the
# listing, a file added deep inside an installed (stable) gem, a load-path directory that was
# unreadable at one boot.
class StaleListingTest < Minitest::Test
  # Requires `features` (require_script), after running `before` (Ruby code) once the load path
  # is set and `warm` required. `fresh` (Ruby code) runs first: it undoes what the stock run's
  # `before` did, so the loadscan run lists the same tree.
  def script(load_path, features, warm: nil, before: "", fresh: "")
    "#{fresh}\n" + require_script(load_path, features, setup: "#{"require #{warm.inspect}" if warm}\n#{before}")
  end

  def boot(code, cache, env: {}, **opts)
    fast = assert_same_as_stock_with_cache(code, cache, loadscan_env: env, **opts)
    refute_nil fast.report["stats"], "loadscan was not active: #{fast.stderr}"
    fast
  end

  # Each feature's result: what `require` returned, or its LoadError's message.
  def results(run) = run.report["results"].to_h { |f, r| [f, r.is_a?(Array) ? r[1] : r] }

  # Item 3, mid-process: the link is listed dangling, then its target appears.
  def test_a_symlink_whose_target_appears_mid_process_is_loaded
    tree = [["app/lib/other.rb", ""], ["app/lib/settings.rb", :symlink, "../config/settings.rb"], ["app/config", :dir]]
    with_files(tree) do |dir|
      backdate(dir)
      target = "#{dir}/app/config/settings.rb"
      code = script(["#{dir}/app/lib"], %w[settings], warm: "other", before: "File.write(#{target.inspect}, '')",
                                                      fresh: "File.delete(#{target.inspect}) if File.exist?(#{target.inspect})")
      run = boot(code, "#{dir}/cache")
      assert_equal true, results(run)["settings"]
    end
  end

  # Item 3, between boots: the first boot caches the directory with the dangling link; the
  # target appears before the next boot, and the directory holding the link does not change.
  def test_a_symlink_whose_target_appears_between_boots_is_loaded
    tree = [["app/lib/other.rb", ""], ["app/lib/sub/settings.rb", :symlink, "../../config/settings.rb"],
            ["app/lib/sub/x.rb", ""], ["app/config", :dir]]
    with_files(tree) do |dir|
      backdate(dir)
      code = script(["#{dir}/app/lib"], %w[settings sub/settings sub/x], warm: "other")
      first = boot(code, "#{dir}/cache")
      assert_match(/cannot load/, results(first)["sub/settings"])
      File.write("#{dir}/app/config/settings.rb", "")
      2.times do
        run = boot(code, "#{dir}/cache")
        assert_equal true, results(run)["sub/settings"]
      end
    end
  end

  # Item 4: a file added to an installed gem's subdirectory (`bundle open`, a distribution
  # update) changes neither the gem's `lib` nor anything a boot of a stable root checks.
  def with_stable_gem
    with_files([["gems/foo/lib/foo.rb", ""], ["gems/foo/lib/foo/a.rb", ""], ["app/lib/app.rb", ""]]) do |dir|
      backdate(dir)
      yield dir, %W[#{dir}/app/lib #{dir}/gems/foo/lib], "#{dir}/gems/foo/lib/foo/b.rb",
            { "LOADSCAN_STABLE_DIRS" => "#{dir}/gems" }
    end
  end

  def test_a_file_added_deep_in_a_stable_gem_mid_process_is_found
    with_stable_gem do |dir, lp, added, env|
      # The stock run added it: remove it, and give its directory back its old mtime.
      fresh = "if File.exist?(#{added.inspect}) then File.delete(#{added.inspect}); " \
              "File.utime(Time.now - 10, Time.now - 10, #{File.dirname(added).inspect}) end"
      code = script(lp, %w[foo/b], warm: "foo/a", before: "File.write(#{added.inspect}, '')", fresh: fresh)
      run = boot(code, "#{dir}/cache", env: env)
      assert_equal true, results(run)["foo/b"]
    end
  end

  def test_a_file_added_deep_in_a_stable_gem_between_boots_is_found
    with_stable_gem do |dir, lp, added, env|
      code = script(lp, %w[foo/a foo/b app], warm: "foo")
      first = boot(code, "#{dir}/cache", env: env)
      assert_match(/cannot load/, results(first)["foo/b"])
      File.write(added, "")
      2.times do
        run = boot(code, "#{dir}/cache", env: env)
        assert_equal true, results(run)["foo/b"]
        assert_operator run.report["stats"][:roots_from_cache], :>=, 2, "served from the cache"
      end
    end
  end

  # Item 6: `lib/` unreadable at one boot (EACCES, as user nobody), readable at the next ones:
  # they must use it (hits), not leave every require to Ruby as a blind spot forever.
  def test_a_root_unreadable_at_one_boot_is_used_when_readable_again
    skip "needs root to boot as another user" unless Process.euid.zero?
    with_files([["app/lib/a.rb", ""], ["app/lib/sub/b.rb", ""], ["app/vendor/v.rb", ""]]) do |dir|
      File.chmod(0o755, dir)
      FileUtils.chmod_R("a+rX", dir)
      cache = File.join(dir, "cache")
      Dir.mkdir(cache)
      File.chown(Etc.getpwnam("nobody").uid, Etc.getgrnam("nogroup").gid, cache)
      backdate(dir)
      code = script(%W[#{dir}/app/lib #{dir}/app/vendor], %w[a sub/b v])
      File.chmod(0o000, "#{dir}/app/lib")
      first = boot(code, cache, as_nobody: true, quiet: false)
      assert_match(/cannot load/, results(first)["a"])
      assert_equal 1, first.stderr.scan(/loadscan: .*unreadable/).size, first.stderr
      File.chmod(0o755, "#{dir}/app/lib")
      2.times do |i|
        run = boot(code, cache, as_nobody: true)
        stats = run.report["stats"]
        assert_equal [true, true, true], results(run).values, "boot #{i + 2}"
        assert_equal 0, stats[:left_to_ruby][:blind_spot], "boot #{i + 2}: #{stats.inspect}"
        assert_equal 3, stats[:hits], "boot #{i + 2}: #{stats.inspect}"
      end
    end
  end
end
