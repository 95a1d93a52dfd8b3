# frozen_string_literal: true

require_relative "../test_helper"
require "open3"

# Directories whose names fold case: on a real exFAT file system (through FUSE on a loop device,
# as bin/setup installs it; it needs root), `require "logger"` opens an app's `Logger.rb`
# before the stdlib's `logger.rb`, and `require "foo"` opens `Foo.rb`. loadscan must load the
# same files as stock Ruby: such a root, or a mount point inside a root, is left to Ruby.
class CaseFoldTest < Minitest::Test
  TOOLS = %w[mkfs.exfat mount.exfat-fuse losetup].freeze

  def setup
    skip "needs root for a loop device and a FUSE mount" unless Process.uid.zero?
    missing = TOOLS.reject { |t| system("command -v #{t} >/dev/null 2>&1") }
    skip "missing #{missing.join(", ")} (bin/setup installs exfat-fuse and exfatprogs)" unless missing.empty?
    skip "no /dev/fuse" unless File.exist?("/dev/fuse")
  end

  # Yields the mount point of a fresh, empty exFAT file system.
  def with_exfat(dir)
    image = File.join(dir, "exfat.img")
    mnt = File.join(dir, "exfat")
    File.open(image, "w") { |f| f.truncate(32 << 20) }
    sh("mkfs.exfat", image)
    device = sh("losetup", "-f", "--show", image).strip
    begin
      Dir.mkdir(mnt)
      sh("mount.exfat-fuse", device, mnt)
      begin
        yield mnt
      ensure
        system("umount", mnt) || system("umount", "-l", mnt)
      end
    ensure
      system("losetup", "-d", device)
    end
  end

  def sh(*cmd)
    out, err, status = Open3.capture3(*cmd)
    assert status.success?, "#{cmd.join(" ")} failed: #{err}"
    out
  end

  FEATURES = %w[logger Logger foo FOO sub/bar SUB/Bar win/logger win/LOGGER win/w set].freeze

  def script(entries)
    <<~RUBY
      $LOAD_PATH.unshift(*#{entries.inspect})
      results = #{FEATURES.inspect}.map do |f|
        [f, $LOAD_PATH.resolve_feature_path(f),
         (begin; require(f); rescue LoadError => e; [e.class, e.message]; end)]
      end
      report("results" => results, "from" => $from, "loaded_features" => $LOADED_FEATURES.dup,
             "stats" => (defined?(Loadscan) ? Loadscan.stats : nil),
             "problems" => (defined?(Loadscan) ? Loadscan.problems.map(&:first) : nil))
    RUBY
  end

  def test_a_case_insensitive_root_and_mount_point_load_what_stock_loads
    Dir.mktmpdir("loadscan-fold") do |dir|
      with_exfat(dir) do |mnt|
        # A root on exFAT, and a case-sensitive root (this dir's file system) with an exFAT
        # directory bind-mounted inside it.
        write = ->(path, body) { FileUtils.mkdir_p(File.dirname(path)) && File.write(path, body) }
        write.("#{mnt}/app/Logger.rb", "($from ||= []) << :app_logger\n")
        write.("#{mnt}/app/Foo.rb", "($from ||= []) << :app_foo\n")
        write.("#{mnt}/app/sub/Bar.rb", "($from ||= []) << :app_bar\n")
        write.("#{mnt}/inner/Logger.rb", "($from ||= []) << :win_logger\n")
        write.("#{dir}/plain/lib/w.rb", "")
        assert File.exist?("#{mnt}/app/logger.rb"), "the exFAT mount does not fold case"
        FileUtils.mkdir_p("#{dir}/plain/lib/win")
        sh("mount", "--bind", "#{mnt}/inner", "#{dir}/plain/lib/win")
        begin
          entries = ["#{mnt}/app", "#{dir}/plain/lib"]
          cache = File.join(dir, "cache")
          [{}, { "LOADSCAN_LAZY" => "0" }].each do |mode|
            # Cold (scan) and warm (from the cache written by the cold boot).
            2.times do |boot|
              env = mode.merge("LOADSCAN_CACHE_DIR" => "#{cache}-#{mode.size}")
              stock, fast = run_both(script(entries), env: env)
              what = "#{mode} boot #{boot}"
              assert_equal stock.report["results"], fast.report["results"], what
              assert_equal stock.report["from"], fast.report["from"], what
              assert_same_loaded_features(stock.report["loaded_features"], fast.report["loaded_features"])
              assert_empty fast.stderr, what
              refute_nil fast.report["stats"], "loadscan was not active (#{what})"
              if boot.zero?
                assert_includes fast.report["problems"], :case_folding, what
              end
            end
          end
          # The stock answers are the case-folded ones, so the test cannot pass by accident.
          stock, = run_both(script(entries))
          assert_empty %i[app_logger app_foo app_bar win_logger] - stock.report["from"], stock.report["from"].inspect
        ensure
          system("umount", "#{dir}/plain/lib/win")
        end
      end
    end
  end
end
