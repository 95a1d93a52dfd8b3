# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/bundler_app"
require_relative "../../lib/loadscan/native"

# Every file loadscan keeps in its cache directory (the cache, the last boot's record, the compile
# cache), damaged as a disk, a crash or a careless hand damages it, one at a time and all at once:
# a real bundler/setup boot then loads stock's $LOADED_FEATURES with at most one warning of
# loadscan's, and so does the boot after it (issue 34: random bytes in last_boot.json killed every
# boot).
class DamagedCacheDirTest < Minitest::Test
  App = Loadscan::TestSupport::BundlerApp
  CMD = [App::RUBY, "boot.rb"].freeze
  ENV_AFTER = { "BOOT_ORDER" => "after" }.freeze

  DAMAGES = {
    "random bytes" => ->(f) { File.binwrite(f, Random.new(34).bytes([File.size(f), 64].max)) },
    "four 0xff bytes in its middle" => lambda { |f|
      b = File.binread(f)
      b[b.size / 2, 4] = "\xff".b * 4
      File.binwrite(f, b)
    },
    "truncated" => ->(f) { File.truncate(f, File.size(f) / 2) },
    "emptied" => ->(f) { File.truncate(f, 0) },
    "a directory in its place" => ->(f) { File.delete(f); Dir.mkdir(f) },
  }.freeze

  def test_every_file_of_the_cache_dir_damaged_every_way_boots_as_stock_with_at_most_one_warning
    Dir.mktmpdir("loadscan-damaged") do |dir|
      dir = File.realpath(dir)
      app = App.plain_app(dir, gems: App::COMMON_GEMS) # pure Ruby: every Ruby here has them
      stock = App.boot(app, CMD, loadscan: false, env: ENV_AFTER)
      cache = File.join(dir, "cache")
      env = ENV_AFTER.merge("LOADSCAN_CACHE_DIR" => cache)
      assert_boot(stock, App.boot(app, CMD, env: env), "cold", warnings: 0)
      files = Dir.children(cache).sort
      # Whatever loadscan keeps there is damaged below, not only the files named today.
      assert_equal [Loadscan::Native::CACHE_FILE, Loadscan::Native::LAST_BOOT_FILE, Loadscan::Native::ISEQ_FILE].sort, files,
                   "the cache dir holds what loadscan names"
      pristine = files.to_h { |f| [f, File.binread(File.join(cache, f))] }

      [*files.map { |f| [f] }, files].each do |targets|
        DAMAGES.each do |how, damage|
          label = "#{targets.join(" and ")}: #{how}"
          restore(cache, pristine)
          targets.each { |f| damage.call(File.join(cache, f)) }
          2.times { |i| assert_boot(stock, boot(app, env, label), "#{label} (boot #{i + 1})") }
        end
      end
    end
  end

  private

  # A boot that must succeed (not App.boot, which raises without the stderr's lesson).
  def boot(app, env, label)
    run = run_ruby(command: CMD, loadscan: true, env: App.env(app).merge(env), chdir: app, timeout: 600)
    assert run.success?, "#{label}: the boot died (#{run.status.inspect}):\n#{run.stderr}"
    run
  end

  def assert_boot(stock, run, label, warnings: 1)
    assert_same_run stock, run, label, quiet: false, only: %w[results]
    assert_operator run.stderr.scan(/^loadscan: /).size, :<=, warnings, "#{label}:\n#{run.stderr}"
    refute_match(/Error|\.rb:\d+:in /, run.stderr, label)
  end

  def restore(cache, pristine)
    FileUtils.rm_rf(cache)
    Dir.mkdir(cache, 0o755)
    pristine.each { |name, bytes| File.binwrite(File.join(cache, name), bytes, perm: 0o644) }
  end
end
