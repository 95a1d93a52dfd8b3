# frozen_string_literal: true

require_relative "../test_helper"

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
        capture("umount", mnt)[2].success? || capture("umount", "-l", mnt)
      end
    ensure
      capture("losetup", "-d", device)
    end
  end

  def sh(*cmd)
    out, err, status = capture(*cmd)
    assert status.success?, "#{cmd.join(" ")} failed: #{err}"
    out
  end

  FEATURES = %w[logger Logger foo FOO sub/bar SUB/Bar win/logger win/LOGGER win/w set].freeze

  # Which app files loaded: each appends its name to $log (require_script reports it as "log").
  def script(entries) = require_script(entries, FEATURES, resolve: true)

  # What loadscan listed as worked around (`Loadscan.problems`), from a run's own process.
  PROBLEMS = "at_exit { File.write(ENV.fetch('LOADSCAN_TEST_PROBLEMS'), " \
             "(defined?(Loadscan) ? Loadscan.problems : []).map(&:first).inspect) }\n"

  def test_a_case_insensitive_root_and_mount_point_load_what_stock_loads
    Dir.mktmpdir("loadscan-fold") do |dir|
      with_exfat(dir) do |mnt|
        # A root on exFAT, and a case-sensitive root (this dir's file system) with an exFAT
        # directory bind-mounted inside it.
        write = ->(path, body) { FileUtils.mkdir_p(File.dirname(path)) && File.write(path, body) }
        write.("#{mnt}/app/Logger.rb", "$log << :app_logger\n")
        write.("#{mnt}/app/Foo.rb", "$log << :app_foo\n")
        write.("#{mnt}/app/sub/Bar.rb", "$log << :app_bar\n")
        write.("#{mnt}/inner/Logger.rb", "$log << :win_logger\n")
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
              problems = File.join(dir, "problems")
              stock, fast = run_both(PROBLEMS + script(entries), env: env.merge("LOADSCAN_TEST_PROBLEMS" => problems))
              what = "#{mode} boot #{boot}"
              assert_same_run(stock, fast, what)
              refute_nil fast.stats, "loadscan was not active (#{what})"
              # Listed on the cold boot (a warm one reads the blind spots from the cache).
              assert_includes File.read(problems), ":case_folding", what if boot.zero?
            end
          end
          # The stock answers are the case-folded ones, so the test cannot pass by accident.
          stock = run_ruby(script(entries), loadscan: false)
          assert_empty %i[app_logger app_foo app_bar win_logger] - stock.report["log"], stock.report["log"].inspect
        ensure
          capture("umount", "#{dir}/plain/lib/win")
        end
      end
    end
  end
end
