# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../../fixtures/bundle"

# The CI recipe (README, "CI"): each job checks the app out afresh with `git clone` (new
# inodes and mtimes everywhere), restores the cache dir from a tarball an earlier job made, and
# boots. The app is the real Bundler app (bundler/setup with a Gemfile.lock) plus code of its
# own in lib/ and app/models/, added to $LOAD_PATH after setup as Rails adds its dirs, all
# committed to a git repository; the cache dir is the default, tmp/cache/loadscan in the
# checkout, never committed. Every boot is compared with stock's.
class CICacheTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp
  # The app's own code: lib/ holds a feature that requires a tree of its own, app/models/ a few.
  APP_FILES = [["lib/ci_app.rb", "Dir[File.join(__dir__, 'ci_app', '**', '*.rb')].sort.each { |f| require f.delete_prefix(__dir__ + '/').delete_suffix('.rb') }\n"],
               *(1..12).map { |i| ["lib/ci_app/part#{i % 3}/mod#{i}.rb", "module CIApp#{i}; end\n"] },
               *%w[user order invoice].map { |m| ["app/models/#{m}.rb", "class #{m.capitalize}; end\n"] },
               ["config/app_paths.rb", <<~RUBY]].freeze
                 $LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../app/models", __dir__))
                 %w[ci_app user order invoice].each { |f| require f }
               RUBY
  # Roots of the app's own: its two dirs (the rest are gems, Ruby's own dirs and this checkout's lib).
  APP_ROOTS = 2

  def setup
    @tmp = File.realpath(Dir.mktmpdir("loadscan-ci"))
    @repo = make_repo(File.join(@tmp, "repo"))
  end

  def teardown
    FileUtils.rm_rf(@tmp)
  end

  # The plain Bundler app, its own code, committed; nothing under tmp/.
  def make_repo(dir)
    FileUtils.mkdir_p(dir)
    app = App.plain_app(dir)
    APP_FILES.each do |rel, body|
      FileUtils.mkdir_p(File.dirname(File.join(app, rel)))
      File.write(File.join(app, rel), body)
    end
    commit(app, %w[/tmp/ /.bundle/])
  end

  # `dir` as a git repository of everything but `ignored`.
  def commit(dir, ignored)
    File.write(File.join(dir, ".gitignore"), ignored.map { "#{_1}\n" }.join)
    git(dir, "init", "-q")
    git(dir, "add", ".")
    git(dir, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "-q", "-m", "app")
    dir
  end

  def git(dir, *args)
    out, err, status = capture("git", *args, chdir: dir)
    assert status.success?, "git #{args.join(" ")}: #{out}#{err}"
  end

  # A job's checkout: `git clone` to `path`. With `settle:`, a pause after it, so that the first
  # boot's listing of the new directories is not racy (a directory changed within a second of
  # the listing that records it counts as changed at the next boot): where a warm boot follows.
  def checkout(path, repo = @repo, settle: false)
    FileUtils.rm_rf(path)
    git(@tmp, "clone", "-q", repo, path)
    sleep 1.2 if settle
    path
  end

  def cache_dir(app) = File.join(app, "tmp", "cache", "loadscan")

  # The CI cache step: the cache dir as a tarball (made at the end of a job), and restored into
  # another checkout (at the start of the next).
  def save_cache(app, tarball, dir = "tmp/cache/loadscan")
    out, err, status = capture("tar", "-C", app, "-czf", tarball, dir)
    assert status.success?, out + err
  end

  def restore_cache(app, tarball, dir = "tmp")
    FileUtils.rm_rf(File.join(app, dir))
    out, err, status = capture("tar", "-C", app, "-xzf", tarball)
    assert status.success?, out + err
  end

  # One boot of the checkout (bundler/setup, then loadscan/setup, then the app's dirs and
  # requires) with the default cache dir, the same as a stock boot of that path (one per path:
  # every checkout of it holds the same): its stats, wall and CPU time.
  def boot(app, env = {})
    env = { "BOOT_ORDER" => "after", "BOOT_PRELUDE" => File.join(app, "config", "app_paths.rb"), "LOADSCAN_CACHE_DIR" => nil,
            "CI" => nil }.merge(env)
    cmd = [App::RUBY, "boot.rb"]
    stock = (@stock ||= {})[app] ||= App.boot(app, cmd, loadscan: false, env: env)
    ours, times = timed { App.boot(app, cmd, env: env) }
    assert_same_run stock, ours, "#{app} #{env.slice("LOADSCAN_VALIDATE", "CI")}"
    stats = ours.report["stats"] or flunk "loadscan was not active in #{app}: #{ours.stderr}"
    stats.merge(times)
  end

  # The block's result, and its child processes' wall and CPU (user + system) time in ms.
  def timed
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    cpu = Process.times.then { _1.cutime + _1.cstime }
    result = yield
    [result, { ms: ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall) * 1000).round,
               cpu_ms: ((Process.times.then { _1.cutime + _1.cstime } - cpu) * 1000).round }]
  end

  # Requires the index answered or left to Ruby as misses (which Ruby's search then settles).
  def answered(stats) = stats[:hits] + stats[:misses] + stats[:left_to_ruby][:unsure_miss]

  def figures(label, stats)
    return unless ENV["LOADSCAN_TEST_FIGURES"]

    puts format("%-44s %5d ms (CPU %5d ms): %3d from the cache, %2d scanned, %2d refreshed, %4d hits, %2d misses, %3d left to Ruby %s", label, stats[:ms], stats[:cpu_ms],
                stats[:roots_from_cache], stats[:roots_scanned], stats[:roots_refreshed], stats[:hits], stats[:misses], stats[:deferred],
                stats[:left_to_ruby].select { |_, n| n.positive? })
  end

  # Job 1 on path A writes the cache; job 2 on path B restores it. The roots are the
  # checkout's absolute paths, so B's own dirs are not in the cache: they are listed (scanned),
  # whichever the validation; everything else (gems, Ruby's dirs: the same paths on every job)
  # comes from the cache and answers the requires.
  def test_a_cache_from_another_checkout_path_serves_all_but_the_apps_own_dirs
    job1 = boot(checkout(File.join(@tmp, "a", "app")))
    figures("job 1, path A, no cache", job1)
    assert_equal 0, job1[:roots_from_cache]
    tarball = File.join(@tmp, "cache.tgz")
    save_cache(File.join(@tmp, "a", "app"), tarball)

    b = checkout(File.join(@tmp, "b", "app"), settle: true)
    [{}, { "CI" => "true" }].each do |env|
      restore_cache(b, tarball)
      job2 = boot(b, env)
      figures("job 2, path B, restored, #{env.empty? ? "mtime" : "CI=true"}", job2)
      assert_equal job1[:load_path_entries] - APP_ROOTS, job2[:roots_from_cache], "all but the app's own dirs from the cache"
      assert_equal APP_ROOTS, job2[:roots_scanned] + job2[:roots_refreshed], "the app's own dirs, listed"
      assert_operator job2[:hits], :>=, job1[:hits], "requires answered from the index"
      assert_equal answered(job1), answered(job2)
    end
    figures("job 2, path B, warm", boot(b))
  end

  # Job 2 checks out at the same path as job 1, as most CI systems do (GitHub's
  # /home/runner/work/<repo>/<repo>, GitLab's /builds/<group>/<project>): every root is in the
  # cache. Checked by mtime, the app's dirs (new inodes and mtimes) are listed again; by
  # listing (CI=true turns it on: LOADSCAN_VALIDATE=listing, config_test), none is, and every
  # require of the app's is answered from the cache. A miss is sure only where every
  # directory it would be in is the one listed: by listing, when its names are the same (the
  # app's new dirs are), so no miss of the boot's goes to Ruby's search either.
  def test_a_cache_from_the_same_checkout_path_serves_every_root_by_listing
    path = File.join(@tmp, "work", "app")
    job1 = boot(checkout(path))
    figures("job 1, no cache", job1)
    tarball = File.join(@tmp, "cache.tgz")
    save_cache(path, tarball)

    restore_cache(checkout(path), tarball)
    by_mtime = boot(path)
    figures("job 2, same path, restored, mtime", by_mtime)
    assert_equal job1[:load_path_entries], by_mtime[:roots_from_cache] + by_mtime[:roots_refreshed] + by_mtime[:roots_scanned]
    assert_equal APP_ROOTS, by_mtime[:roots_refreshed] + by_mtime[:roots_scanned], "the app's dirs are new by mtime"

    restore_cache(checkout(path, settle: true), tarball)
    listed = boot(path, "CI" => "true")
    figures("job 2, same path, restored, CI=true", listed)
    assert_equal job1[:load_path_entries], listed[:roots_from_cache], "every root from the cache"
    assert_equal 0, listed[:roots_scanned] + listed[:roots_refreshed]
    assert_equal answered(job1), answered(listed)
    # The cache keeps job 1's records of the app's dirs: a boot by mtime lists them again (and
    # writes them), after which a boot by either is warm.
    again = boot(path)
    figures("job 2, same path, next boot, mtime", again)
    assert_equal APP_ROOTS, again[:roots_refreshed] + again[:roots_scanned]
    warm = boot(path, "CI" => "true")
    figures("job 2, same path, warm, CI=true", warm)
    # Every miss of the restored boot is sure from job 1's records, as a warm boot's are (job 1's
    # own split between sure and unsure misses depends on how racy its fresh dirs were).
    assert_equal [warm[:misses], 0], [listed[:misses], listed[:left_to_ruby][:unsure_miss]], "misses by listing, against warm"
    assert_equal 0, warm[:left_to_ruby][:unsure_miss]
  end

  # A CI job usually restores the installed gems too (Bundler's path, vendor/bundle, from the
  # CI's cache: `tar` keeps the mtimes, not the inodes). The app here is the generated Bundler
  # app (fixtures/bundle.rb: its gems installed in the checkout's gem_home/, a Gemfile.lock),
  # checked out at the same path by each job. By mtime a gem's entry is new (a new inode) and
  # scanned again; by listing (CI=true) the restored cache serves everything.
  def test_restored_gems_are_served_from_the_cache_by_listing_only
    repo = File.join(@tmp, "bundle-src")
    Fixtures::Bundle.generate(out: repo, gems: 20, files: 60)
    commit(repo, %w[/gem_home/ /tmp/ /.bundle/ /*.marshal])
    gems_tarball = File.join(@tmp, "gems.tgz")
    save_cache(repo, gems_tarball, "gem_home")
    path = File.join(@tmp, "work", "bundle")
    job = lambda do |env, cache|
      checkout(path, repo)
      restore_cache(path, gems_tarball, "gem_home")
      restore_cache(path, cache) if cache
      fixture_boot(path, env)
    end

    job1 = job.call({}, nil)
    figures("gems restored, job 1, no cache", job1)
    tarball = File.join(@tmp, "cache.tgz")
    save_cache(path, tarball)
    by_mtime = job.call({}, tarball)
    figures("gems restored, job 2, mtime", by_mtime)
    # By mtime the restored gems are new directories (new inodes) and listed again — unless the
    # file system gave the extracted tree the inodes the deleted checkout freed, with tar's
    # mtimes: then their stamps match, their contents are the same, and using them is right.
    # Either way the answers are job 1's.
    assert_equal answered(job1), answered(by_mtime)
    by_listing = job.call({ "CI" => "true" }, tarball)
    figures("gems restored, job 2, CI=true", by_listing)
    assert_equal job1[:load_path_entries], by_listing[:roots_from_cache], "every root from the cache"
    assert_equal answered(job1), answered(by_listing)
  end

  # A boot of the generated app checked out at `path` (its boot.rb: bundler/setup, the app's
  # dirs, then loadscan/setup as a prelude, then its requires), next to a stock boot.
  def fixture_boot(path, env)
    stats = File.join(@tmp, "stats.marshal")
    env = { "BUNDLE_GEMFILE" => File.join(path, "Gemfile"), "GEM_HOME" => File.join(path, "gem_home"),
            "GEM_PATH" => [File.join(path, "gem_home"), *Fixtures::Bundle.ruby_gem_path].join(File::PATH_SEPARATOR),
            "LOADSCAN_CACHE_DIR" => nil, "CI" => nil, "BUNDLE_APP_CONFIG" => File.join(path, ".bundle") }.merge(env)
    prelude = File.join(Loadscan::TestSupport::ROOT, "bench", "preludes", "loadscan.rb")
    cmd = [RbConfig.ruby, File.join(path, "boot.rb")]
    stock = (@stock ||= {})[path] ||= run_ruby(command: cmd, env: env, report_var: "BOOT_REPORT", chdir: path)
    ours, times = timed do
      run_ruby!(command: cmd, env: env.merge("BOOT_PRELUDE" => prelude, "BENCH_LOADSCAN_STATS" => stats), report_var: "BOOT_REPORT",
                chdir: path)
    end
    assert_same_run stock, ours, "the generated app at #{path} #{env.slice("CI")}"
    Marshal.load(File.binread(stats)).merge(times) # rubocop:disable Security/MarshalLoad
  end
end
