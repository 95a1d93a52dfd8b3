# frozen_string_literal: true

require_relative "../test_helper"

# The persistent cache, with real processes and real files: warm boots equal stock boots after
# every kind of change, bad caches degrade to a scan with one warning, writes are atomic.
class CacheTest < Minitest::Test
  FEATURES = %w[a b sub/c shadow deep/x new/n moved/m].freeze
  FILE = "loadscan.cache" # a name of loadscan's own (`index` before: see test_a_planted_symlink_*)

  def script(load_path) = require_script(load_path, FEATURES)

  # Boots stock and with loadscan using `cache` (and `env`); asserts the same results and
  # $LOADED_FEATURES, and unless `quiet: false` an empty stderr; returns loadscan's run.
  def boot(load_path, cache, env: {}, quiet: true, **opts)
    fast = assert_same_as_stock_with_cache(script(load_path), cache, loadscan_env: env, quiet: quiet, **opts)
    assert_empty fast.stderr, "unexpected warning" if quiet
    fast
  end

  def tree
    [["e1/a.rb", ""], ["e1/sub/c.rb", ""], ["e1/deep/x.rb", ""], ["e2/b.rb", ""], ["e2/shadow.rb", ""],
     ["e2/moved/m.rb", ""]]
  end

  def with_app
    with_files(tree) do |dir|
      yield dir, %W[#{dir}/e1 #{dir}/e2], File.join(dir, "cache")
    end
  end

  # The load-path entries' directories dated back (FileTree#backdate): warm boots judge them by
  # their stamps rather than the racy window.
  def backdate_entries(dir) = backdate(dir, %w[e*/**/ e*])

  def test_warm_boot_serves_from_the_cache_and_equals_stock
    with_app do |dir, lp, cache|
      backdate_entries(dir)
      cold = boot(lp, cache)
      assert File.file?(File.join(cache, FILE)), "the cold boot writes the cache at exit"
      assert_equal 0, cold.report["stats"][:roots_from_cache]
      warm = boot(lp, cache)
      stats = warm.report["stats"]
      assert_operator stats[:roots_from_cache], :>=, 2, stats.inspect
      assert_equal 0, stats[:roots_scanned], stats.inspect
    end
  end

  def test_changes_between_boots_are_caught
    changes = {
      "file in a new subdirectory" => ->(d) { FileUtils.mkdir_p("#{d}/e1/new"); File.write("#{d}/e1/new/n.rb", "") },
      "file shadowing a later entry" => ->(d) { File.write("#{d}/e1/shadow.rb", "") },
      "directory replaced by a checkout" => lambda { |d|
        FileUtils.mv("#{d}/e2/moved", "#{d}/e2/gone")
        FileUtils.mkdir_p("#{d}/e2/moved")
        File.write("#{d}/e2/moved/m.rb", "")
      },
      "deep file removed" => ->(d) { File.delete("#{d}/e1/deep/x.rb") },
    }
    changes.each do |name, change|
      with_app do |dir, lp, cache|
        boot(lp, cache)
        change.call(dir) # right after the cache write: the same second, the racy window
        boot(lp, cache)
        backdate_entries(dir)
        boot(lp, cache)
      rescue Minitest::Assertion => e
        raise e.exception("#{name}: #{e.message}")
      end
    end
  end

  def test_listing_mode_survives_a_fresh_checkout
    with_app do |dir, lp, cache|
      env = { "LOADSCAN_VALIDATE" => "listing" }
      boot(lp, cache, env: env)
      boot(lp, cache, env: env) # settles racy directories
      # A fresh checkout: same names, new inodes and mtimes.
      %w[e1 e2].each do |e|
        FileUtils.cp_r("#{dir}/#{e}", "#{dir}/#{e}.new")
        FileUtils.rm_rf("#{dir}/#{e}")
        FileUtils.mv("#{dir}/#{e}.new", "#{dir}/#{e}")
      end
      stats = boot(lp, cache, env: env).report["stats"]
      assert_equal 0, stats[:roots_scanned] + stats[:roots_refreshed], stats.inspect
      File.write("#{dir}/e1/shadow.rb", "")
      stats = boot(lp, cache, env: env).report["stats"]
      assert_equal 1, stats[:roots_refreshed], stats.inspect
    end
  end

  def test_forked_children_resolve_but_never_write_the_cache
    with_app do |dir, lp, cache|
      run = run_ruby(<<~RUBY, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
        $LOAD_PATH.unshift(*#{lp.inspect})
        require "a"
        pid = fork do
          $LOAD_PATH.unshift(#{"#{dir}/e1/sub".inspect}) # a new entry: the child's index is dirty
          exit!(2) unless require("c") && Loadscan.lookup("c") == #{"#{dir}/e1/sub/c.rb".inspect}
          exit(0) # runs at_exit handlers: loadscan's must not write from a child
        end
        Process.wait(pid)
        report("child" => $?.exitstatus, "cache_after_child" => File.exist?(#{File.join(cache, FILE).inspect}))
      RUBY
      assert run.status.success?, run.stderr
      assert_equal({ "child" => 0, "cache_after_child" => false }, run.report)
      assert File.exist?(File.join(cache, FILE)), "the parent writes the cache at its exit"
    end
  end

  def test_readonly_never_writes
    with_app do |_dir, lp, cache|
      boot(lp, cache, env: { "LOADSCAN_READONLY" => "1" })
      refute File.exist?(File.join(cache, FILE))
      boot(lp, cache)
      before = File.binread(File.join(cache, FILE))
      boot(lp + ["#{lp[0]}/sub"], cache, env: { "LOADSCAN_READONLY" => "1" })
      assert_equal before, File.binread(File.join(cache, FILE))
    end
  end

  # Loadscan.setup again, with settings, after loadscan was set up (RUBYOPT=-rloadscan/setup,
  # here `-r`): they apply, as stock's boot is unchanged. `readonly:` leaves both dirs unwritten;
  # `cache_dir:` moves the cache (the index starts again on it).
  def test_a_later_setup_with_settings_applies_them
    with_app do |dir, lp, cache|
      other = "#{dir}/other"
      code = ->(settings) { "Loadscan.setup(#{settings}); #{script(lp)}" }
      [["readonly: true", []], ["readonly: true, cache_dir: #{other.inspect}", []], ["cache_dir: #{other.inspect}", [other]]].each do |settings, written|
        FileUtils.rm_rf([cache, other])
        stock = run_ruby(script(lp), loadscan: false)
        fast = run_ruby(code.(settings), loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
        assert fast.success?, fast.stderr
        assert_same_run(stock, fast, settings)
        assert_equal written, [cache, other].select { |d| File.exist?(File.join(d, FILE)) }, settings
        assert_operator fast.report["stats"][:hits], :>, 0, "the index still answers: #{settings}"
      end
    end
  end

  # What kill -9 during a write leaves behind: the previous cache and a half-written temp file
  # (the write is temp file + rename; ext/loadscan-core/tests/crash.rs kills real writers).
  def test_a_write_killed_halfway_leaves_the_previous_cache
    with_app do |dir, lp, cache|
      backdate_entries(dir) # the second boot then finds nothing changed and leaves the cache alone
      boot(lp, cache)
      index = File.join(cache, FILE)
      before = File.binread(index)
      tmp = File.join(cache, ".#{FILE}.tmp.999999.1")
      File.binwrite(tmp, before[0, before.bytesize / 2])
      boot(lp, cache) # readers never see it: no warning, same answers
      assert_equal before, File.binread(index)
      backdate(tmp, ["."])
      boot(lp + ["#{lp[0]}/sub"], cache) # a new entry makes the cache dirty: written over it
      refute File.exist?(tmp), "the next write removes a dead writer's temp file"
      refute_equal before, File.binread(index)
      boot(lp, cache)
    end
  end

  def test_concurrent_cold_boots_leave_one_valid_cache
    with_app do |_dir, lp, cache|
      code = script(lp)
      stock = run_ruby(code, loadscan: false)
      runs = 8.times.map { Thread.new { run_ruby(code, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache }) } }.map(&:value)
      runs.each do |run|
        assert run.status.success?, run.stderr
        assert_empty run.stderr
        assert_equal stock.report["results"], run.report["results"]
      end
      assert_equal [FILE, "last_boot.json", "iseq.bin"].sort, Dir.children(cache).sort
      assert_operator boot(lp, cache).report["stats"][:roots_from_cache], :>=, 2
    end
  end

  def corruptions
    {
      "truncated" => ->(f) { File.binwrite(f, File.binread(f)[0, 100]) },
      "random bytes" => ->(f) { File.binwrite(f, Random.new(1).bytes(5000)) },
      "corrupted body" => ->(f) { b = File.binread(f); b[-10] = (b[-10].ord ^ 0xff).chr; File.binwrite(f, b) },
      "directory" => ->(f) { File.delete(f); Dir.mkdir(f) },
      "fifo" => ->(f) { File.delete(f); system("mkfifo", f, exception: true) },
      "symlink" => ->(f) { File.rename(f, "#{f}.real"); File.symlink("#{f}.real", f) },
      "group-writable" => ->(f) { File.chmod(0o664, f) },
      "owned by another user" => ->(f) { File.chown(65_534, 65_534, f) },
    }
  end

  def test_every_bad_cache_warns_once_and_boots_correctly
    corruptions.each do |name, corrupt|
      with_app do |_dir, lp, cache|
        boot(lp, cache)
        corrupt.call(File.join(cache, FILE))
        run = boot(lp, cache, quiet: false, env: { "LOADSCAN_READONLY" => "1" })
        assert_equal 1, run.stderr.scan(/loadscan: .*cache/).size, "#{name}: #{run.stderr}"
        assert_operator run.report["stats"][:roots_scanned], :>=, 2, name
      end
    end
  end

  # Written by another cache format, or by another Ruby or loadscan (its environment key differs;
  # the checksum is recomputed so only the key is wrong): rebuilt without a warning.
  def test_an_outdated_cache_is_rebuilt_quietly
    require "zlib"
    outdated = {
      "format version" => ->(b) { b[8] = 99.chr },
      "environment key" => lambda do |b|
        b[64] = (b[64].ord ^ 1).chr
        b[24, 4] = [Zlib.crc32(b[64..])].pack("V")
      end,
    }
    outdated.each do |name, change|
      with_app do |_dir, lp, cache|
        boot(lp, cache)
        file = File.join(cache, FILE)
        bytes = File.binread(file)
        change.call(bytes)
        File.binwrite(file, bytes)
        run = boot(lp, cache) # quiet: no warning
        assert_operator run.report["stats"][:roots_scanned], :>=, 2, name
        assert_operator boot(lp, cache).report["stats"][:roots_from_cache], :>=, 2, "#{name}: rewritten at exit"
      end
    end
  end

  def test_hostile_cache_dirs
    with_app do |dir, lp, _cache|
      File.symlink("#{dir}/nowhere", "#{dir}/dangling")
      run = boot(lp, "#{dir}/dangling", quiet: false)
      assert_equal 1, run.stderr.scan(/loadscan: .*cache/).size, run.stderr
      assert_match(/dangling is a symlink/, run.stderr)
      refute File.exist?("#{dir}/nowhere"), "never created through the symlink"
      File.delete("#{dir}/dangling")
      FileUtils.chmod_R("a+rX", dir)
      searchable_parent(dir)
      Dir.mkdir("#{dir}/locked", 0o555)
      run = boot(lp, "#{dir}/locked", quiet: false, as_nobody: true)
      assert_equal 1, run.stderr.scan(/loadscan: could not write the cache/).size, run.stderr
    end
  end

  # Docker and CI: the image build (root) writes the cache with `loadscan build`; the app's user
  # (nobody) boots with LOADSCAN_READONLY=1 and is served every entry from it, with no warning
  # and no write.
  def test_a_cache_built_as_root_serves_another_user_read_only
    skip "needs root to act as two users" unless Process.euid.zero?
    Dir.mktmpdir("loadscan-image") do |top|
      File.chmod(0o755, top)
      dir = File.join(top, "app")
      make_tree(dir, tree)
      FileUtils.chmod_R("a+rX", dir)
      backdate_entries(dir)
      lp = %W[#{dir}/e1 #{dir}/e2]
      cache = File.join(top, "cache")
      exe = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")
      build = run_ruby(file: exe, args: [*lp.flat_map { |e| ["-I", e] }, "build"], env: { "LOADSCAN_CACHE_DIR" => cache })
      assert build.success?, build.stderr
      assert_match(/\Awritten /, build.stdout)
      before = File.stat(File.join(cache, FILE))
      assert_equal 0, before.uid
      run = boot(lp, cache, env: { "LOADSCAN_READONLY" => "1" }, as_nobody: true) # quiet: no warning at all
      stats = run.report["stats"]
      assert_equal 0, stats[:roots_scanned], stats.inspect
      assert_operator stats[:roots_from_cache], :>=, 2, stats.inspect
      assert_equal 0, stats[:dirs_listed_lazily], stats.inspect
      after = File.stat(File.join(cache, FILE))
      assert_equal [before.mtime, before.ino], [after.mtime, after.ino], "the read-only boots never wrote"
      assert_empty run.stderr
    end
  end

  # Runs a shell command as `user` (a name or a uid), as the test's `as_nobody:` boots do.
  def as_user(user, *cmd)
    system("setpriv", "--reuid=#{user}", "--regid=#{user == "nobody" ? "nogroup" : user}", "--clear-groups", *cmd,
           exception: true)
  end

  # The issue's attack: one user plants `mkdir D && ln -s VICTIM_DIR D/loadscan`, another boots
  # with that cache dir. The victim's files must stay as they were (the old cache name, `index`,
  # was a repository's `.git/index`), and the boot must equal stock, with one warning.
  def test_a_planted_symlink_never_clobbers_another_users_file
    skip "needs root to act as two users" unless Process.euid.zero?
    [["root", nil], ["nobody", 4242]].each do |victim, attacker|
      Dir.mktmpdir("loadscan-attack") do |top|
        File.chmod(0o1777, top) # like /tmp: anyone may create entries, not replace others'
        victim_dir = File.join(top, "victim-repo.git")
        Dir.mkdir(victim_dir)
        File.write("#{victim_dir}/index", "precious index")
        File.write("#{victim_dir}/#{FILE}", "precious notes")
        FileUtils.chown_R(victim, nil, victim_dir) if victim != "root"
        planted = File.join(top, "cache")
        as_user(attacker || "nobody", "mkdir", planted)
        as_user(attacker || "nobody", "ln", "-s", victim_dir, "#{planted}/loadscan")
        runs = with_files(tree) do |dir|
          FileUtils.chmod_R("a+rX", dir)
          searchable_parent(dir)
          lp = %W[#{dir}/e1 #{dir}/e2]
          2.times.map { boot(lp, "#{planted}/loadscan", quiet: false, as_nobody: victim == "nobody") }
        end
        assert_equal "precious index", File.read("#{victim_dir}/index"), victim
        assert_equal "precious notes", File.read("#{victim_dir}/#{FILE}"), victim
        assert_equal ["index", FILE].sort, Dir.children(victim_dir).sort, victim
        runs.each do |run|
          assert_equal 1, run.stderr.scan(/loadscan: .*cache/).size, "#{victim}: #{run.stderr}"
          assert_match(/owned by uid/, run.stderr)
        end
      end
    end
  end

  # A cache dir that can be neither read nor written warns once per boot, not at start and
  # again at exit.
  def test_an_unusable_cache_dir_warns_once
    with_app do |dir, lp, _cache|
      File.write("#{dir}/plain-file", "")
      ["/dev/null", "#{dir}/plain-file", "#{dir}/plain-file/below"].each do |cache|
        run = boot(lp, cache, quiet: false)
        assert_equal 1, run.stderr.scan(/loadscan: /).size, "#{cache}: #{run.stderr}"
        assert_match(/cache/, run.stderr)
      end
      assert_equal "", File.read("#{dir}/plain-file")
    end
  end

  # A cache of an older loadscan (named `index`) is left alone: the new one has its own name.
  def test_an_old_index_file_is_ignored
    with_app do |_dir, lp, cache|
      FileUtils.mkdir_p(cache)
      File.write("#{cache}/index", "LOADSCAN from an older version")
      boot(lp, cache) # quiet
      assert_equal "LOADSCAN from an older version", File.read("#{cache}/index")
      assert_operator boot(lp, cache).report["stats"][:roots_from_cache], :>=, 2
    end
  end

  # A program that puts a fresh temp dir on $LOAD_PATH on every run: the cache stops growing
  # once the roots no longer on the load path reach their cap (64 here, more in apps with more
  # entries), the oldest dropped first.
  def test_roots_no_longer_on_the_load_path_do_not_grow_the_cache
    with_app do |dir, lp, cache|
      sizes = 72.times.map do |i|
        fresh = "#{dir}/fresh/#{i}"
        FileUtils.mkdir_p(fresh)
        File.write("#{fresh}/t#{i}.rb", "")
        run = run_ruby(<<~RUBY, loadscan: true, env: { "LOADSCAN_CACHE_DIR" => cache })
          $LOAD_PATH.unshift(*#{(lp + [fresh]).inspect})
          require "t#{i}"
          require "a"
          report(Loadscan.stats[:hits])
        RUBY
        assert run.status.success?, run.stderr
        assert_equal 2, run.report
        File.size(File.join(cache, FILE))
      end
      assert_operator sizes[66], :>, sizes[0], sizes.inspect
      assert_operator sizes[71], :<=, sizes[66] + 10, "still growing: #{sizes.last(10).inspect}"
    end
  end
end
