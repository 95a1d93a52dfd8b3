# frozen_string_literal: true

require_relative "../test_helper"
require "json"
require_relative "../../lib/loadscan/version"

# Every command of `exe/loadscan` and every usage error, text and `--json`, against the
# recorded output in test/golden/cli.txt (a real tree, a real cache, real boots). What differs
# from run to run (the temp dir, versions, times, sizes, pids) is replaced by a placeholder
# first; `--json` output is parsed back and re-printed, so the golden file also pins its schema.
# After an intended change: LOADSCAN_BLESS=1 ruby -Itest test/loadscan/cli_golden_test.rb, and
# review the diff.
class CLIGoldenTest < Minitest::Test
  EXE = File.join(Loadscan::TestSupport::ROOT, "exe", "loadscan")
  GOLDEN = File.join(Loadscan::TestSupport::ROOT, "test", "golden", "cli.txt")

  TREE = [["app/lib/a.rb", ""], ["app/lib/sub/b.rb", ""], ["app/lib/c.#{RbConfig::CONFIG["DLEXT"]}", ""],
          ["app/lib/loop", :symlink, "."], ["app/lib/gone", :symlink, "nowhere"],
          ["app/config/boot.rb", "$LOAD_PATH.unshift(File.expand_path('../lib', __dir__))\n" \
                                 "require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}\n"],
          ["bare/config/boot.rb", "# does not set loadscan up\n"]].freeze

  def test_every_command_and_error_matches_the_golden_output
    with_files(TREE) do |dir|
      @dir = dir
      File.chmod(0o700, dir) # the cache dir's ancestors must not be writable by others
      sections = cases.map { |name, args, opts| section(name, *run_cli(args, **(opts || {}))) }
      actual = sections.join
      if ENV["LOADSCAN_BLESS"]
        FileUtils.mkdir_p(File.dirname(GOLDEN))
        File.write(GOLDEN, actual)
      end
      expected = File.read(GOLDEN)
      # One assertion per section, so a failure names the command.
      split = ->(text) { text.split(/^(?==== )/).to_h { |s| [s.lines.first, s] } }
      want = split.(expected)
      got = split.(actual)
      assert_equal want.keys, got.keys, "the set of cases changed: bless and review"
      want.each { |key, text| assert_equal text, got[key], "#{key.chomp}: output differs from #{GOLDEN}" }
    end
  end

  def cache = File.join(@dir, "cache")
  def lib = File.join(@dir, "app", "lib")

  # [name, argv, options]; they run in this order (stats before and after a boot, clear last).
  def cases
    features = %w[a sub/b c nope loop/a ./a]
    [
      ["help", %w[--help]], ["-h", %w[-h]], ["version", %w[--version]],
      ["no command", []], ["unknown command", %w[bogus]], ["unknown option", %w[--bogus stats]],
      ["missing option argument", %w[stats --cache-dir]], ["explain without feature", %w[explain]],
      ["lookup without feature", %w[lookup]],
      ["lookup", ["-I", lib, "lookup", *features]], ["lookup --json", ["--json", "-I#{lib}", "lookup", *features]],
      ["lookup, full scan", ["-I", lib, "lookup", "loop/a"], { env: { "LOADSCAN_LAZY" => "0" } }],
      ["explain", ["-I", lib, "explain", "a", "nope", "loop/a"]],
      ["explain --json", ["--json", "-I", lib, "explain", "sub/b", "./a"]],
      ["problems", ["-I", lib, "problems"], { env: { "LOADSCAN_LAZY" => "0" }, only_ours: true }],
      ["problems --json", ["--json", "-I", lib, "problems"], { env: { "LOADSCAN_LAZY" => "0" }, only_ours: true }],
      ["verify", ["-I", lib, "verify"]], ["verify --json", ["--json", "-I", lib, "verify"]],
      ["stats, no boot yet", %w[stats]], ["stats --json, no boot yet", %w[--json stats]],
      ["build", ["-I", lib, "build"]], ["build --json", ["--json", "-I", lib, "build"]],
      ["doctor", %w[doctor], { chdir: "app", boot: true }], ["doctor --json", %w[--json doctor], { chdir: "app" }],
      ["doctor, boot without loadscan", %w[doctor], { chdir: "bare" }],
      ["doctor --json, boot without loadscan", %w[--json doctor], { chdir: "bare" }],
      ["stats", %w[stats]], ["stats --json", %w[--json stats]],
      ["clear", %w[clear]], ["clear, nothing left", %w[clear]], ["clear --json", %w[--json clear]],
      ["install, no Gemfile", %w[install --dry-run], { chdir: "bare" }],
    ]
  end

  # Runs the CLI (after a boot of the app that records its figures, with `boot: true`).
  # `only_ours`: what concerns the test's tree, not the system's own directories.
  def run_cli(args, env: {}, chdir: nil, boot: false, only_ours: false)
    # GC not deferred: whether it is depends on the Ruby (BootGC.supported?), the output must not.
    base = { "LOADSCAN_CACHE_DIR" => cache, "BUNDLE_GEMFILE" => nil, "LOADSCAN_BLESS" => nil, "LOADSCAN_GC" => "off",
             "RAILS_ENV" => nil, "RACK_ENV" => nil, "LOADSCAN_READONLY" => nil, "LOADSCAN_COMPILE_CACHE" => "0" }
    if boot
      # Garbage enough for GC runs on every Ruby (4.1 starts with a heap a small boot never fills).
      run = run_ruby("load 'config/boot.rb'; require 'a'; require 'sub/b'; begin; require 'nope'; rescue LoadError; end; " \
                     "300_000.times { Object.new }",
                     loadscan: nil, env: base, chdir: File.join(@dir, "app"))
      assert run.success?, run.stderr
    end
    run = run_ruby(file: EXE, args: args, loadscan: nil, env: base.merge(env), chdir: File.join(@dir, chdir || ""))
    out, err, status = run.stdout, run.stderr, run.status
    json = args.include?("--json") && !out.empty?
    if only_ours
      out = json ? JSON.generate(JSON.parse(out).select { |p| p["message"].include?(@dir) }) : out.lines.grep(/#{Regexp.escape(@dir)}/).join
    end
    # Empty arrays and objects as `[]`/`{}` whatever the json gem's version prints (2.9 does so, 2.6 splits them).
    out = "#{JSON.pretty_generate(normalize_json(JSON.parse(out))).gsub(/\[\s+\]/, "[]").gsub(/\{\s+\}/, "{}")}\n" if json
    [out, err, status.exitstatus]
  end

  # Counts that depend on the Ruby and the machine (its own load path), not on the CLI.
  MACHINE_COUNTS = %w[features entries checked load_path_entries roots_scanned roots_refreshed roots_from_cache scans
                      dirs_listed_lazily size age_s threads rss_kb].freeze

  # A boot's GC figures and doctor's settings depend on the Ruby (its heaps, its startup): their
  # keys are kept, and whether GC was deferred, what ended the boot and the environment doctor's
  # advice was checked in.
  def normalize_gc(gc)
    gc.to_h { |k, v| [k, %w[deferred ended_by part environment].include?(k) ? v : "<GC>"] }
  end

  def normalize_json(value)
    case value
    when Hash
      value.to_h do |k, v|
        next [k, normalize_gc(v)] if %w[gc gc_settings].include?(k) && v.is_a?(Hash)

        [k, MACHINE_COUNTS.include?(k) || k.end_with?("_ms") ? "<N>" : normalize_json(v)]
      end
    when Array then value.map { |v| normalize_json(v) }
    else value
    end
  end

  def section(name, out, err, status)
    "=== #{name}\n#{normalize(out)}--- stderr\n#{normalize(err)}--- exit #{status}\n"
  end

  def normalize(text)
    text.gsub(@dir, "<DIR>")
        .gsub(%r{/\S*/loadscan-run[^/\s"]+/script\.rb}, "<SCRIPT>")
        .gsub(RUBY_DESCRIPTION, "<RUBY_DESCRIPTION>")
        .gsub(/(rubygems|bundler)(": "|: )[\d.]+(?:\.?dev)?/, '\1\2<V>')
        .gsub(Loadscan::VERSION, "<VERSION>")
        .gsub(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/, "<TIME>")
        .gsub(/\bpid(": |\s)\d+/, 'pid\1<N>')
        .gsub(/Ruby \d\.\d\.\d+|"ruby": "\d\.\d\.\d+"/) { |m| m.sub(/\d\.\d\.\d+/, "<V>") }
        .gsub(/\(\d+ bytes, owner (\w+), mode (\d+), \d+ s old\)/, '(<N> bytes, owner \1, mode \2, <N> s old)')
        .gsub(/threads=\d+/, "threads=<N>")
        .gsub(/setup \d+\.\d ms/, "setup <N> ms")
        .gsub(/\b\d+ (entries|features|from the cache|listed|dirs listed on demand)/, '<N> \1')
        .gsub(/(Kernel#require: |"require": ")[^)"]*/, '\1<WHERE>')
        .gsub(/\.#{RbConfig::CONFIG["DLEXT"]}\b/, ".<DLEXT>")
        .gsub(/^(last boot's )?GC in the boot: .*$/) { |line| line.gsub(/\d+/, "<N>") }
        .gsub(/^  (RUBY_GC_\S+ ?)+$/, "  <SETTINGS>")
        .gsub(/^.*GC runs.*$/) { |line| line.gsub(/[+-]?\d+/, "<N>") }
  end
end
