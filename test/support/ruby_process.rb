# frozen_string_literal: true

require "open3"
require_relative "paths"
require_relative "../../fixtures/bounded"
require "json"

module Loadscan
  module TestSupport
    # The one way the suite runs Ruby in a separate process, with or without loadscan.
    #
    #   run_ruby("require 'set'; report($LOADED_FEATURES.dup)", loadscan: true)  # inline code
    #   run_ruby(file: "tmp/fixtures/app/boot.rb", loadscan: false)               # a Ruby file
    #   run_ruby(command: ["bundle", "exec", "ruby", "boot.rb"], loadscan: false) # a command
    #   stock, fast = run_both(code, loadscan_env: { "LOADSCAN_CACHE_DIR" => cache })
    #
    # Inline code and files run with `$LOAD_PATH` as given: loadscan is loaded by absolute path
    # (`-r lib/loadscan/setup.rb`, never through -I), so both runs have the same load path.
    # `loadscan: nil` adds nothing (the program sets loadscan up itself, as exe/loadscan does). A
    # command cannot be given `-r`: its boot sets loadscan up unless LOADSCAN_TEST_STOCK is set,
    # which every stock run gets.
    #
    # A program with a prelude hook of its own (fixtures' boot.rb loads ENV["BOOT_PRELUDE"]) gets
    # loadscan through it instead of `-r` when `prelude_var:` names the variable.
    #
    # The program reports by calling `report(value)` (defined for inline code) or by writing
    # Marshal to the file named by ENV[report_var]; the value comes back in Result#report.
    # Inline code, or a file through its prelude hook, with loadscan active also returns
    # `Loadscan.stats` as they were at exit (Result#stats).
    # Each run gets a cold cache dir of its own unless `env` names one.
    #
    # Other programs whose output a test reads (git, tar, make, mount) run with `capture`, under
    # the same timeout:
    #
    #   out, err, status = capture("git", "clone", "-q", repo, path, chdir: dir)
    module RubyProcess
      SETUP = File.join(Loadscan::TestSupport::LIB, "loadscan/setup.rb")
      # What a program calls for a Ractor's result: #value from Ruby 4.0, which removed #take.
      RACTOR_VALUE = Ractor.method_defined?(:value) ? "value" : "take"

      Result = Struct.new(:report, :stdout, :stderr, :status, :stats, :failed_opens, keyword_init: true) do
        def success? = status.success?

        # The process's $LOADED_FEATURES, when its report is a Hash that has them.
        def loaded_features = report.is_a?(Hash) ? report["loaded_features"] : nil

        def json = JSON.parse(stdout)

        # stderr with the run's own temp dir (which holds the script) named the same in every run.
        def stderr_normalized = stderr.gsub(%r{/loadscan-run[^/\s:]+/}, "/RUN/")
      end

      # Registered after loadscan's setup, so it runs before loadscan's own at_exit (the cache
      # write); in a forked child too, whose stats the parent's then replace.
      STATS_AT_EXIT = <<~RUBY
        at_exit { File.binwrite(ENV.fetch("LOADSCAN_TEST_STATS"), Marshal.dump(Loadscan.stats)) if defined?(Loadscan.active?) && Loadscan.active? }
      RUBY

      # Inline code starts with this.
      PRELUDE = <<~RUBY
        def report(value)
          File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(value))
        end
        #{STATS_AT_EXIT}
      RUBY

      # What a program's own prelude hook (`prelude_var:`, fixtures/README.md's BOOT_PRELUDE)
      # loads for a loadscan run.
      LOADSCAN_PRELUDE = "load #{SETUP.inspect}\n#{STATS_AT_EXIT}"

      module_function

      # Our own files, which a boot with loadscan adds to $LOADED_FEATURES.
      def own_feature?(path)
        path.start_with?(File.join(Loadscan::TestSupport::LIB, "loadscan"))
      end

      # Runs one process and returns its Result (never asserts: the caller judges the status).
      # A block is called with the pid while the process runs (Ruby's pid when `timeout: nil`).
      # `as_nobody: true` runs it as user nobody (where permissions must apply even though the
      # suite runs as root); the trees it reads must then be world-readable. `strace: true` counts
      # the `openat` calls that failed (Result#failed_opens).
      def run_ruby(code = nil, loadscan: nil, file: nil, command: nil, env: {}, chdir: Dir.pwd, args: [], ruby_opts: [],
                   timeout: 60, as_nobody: false, strace: false, report_var: "LOADSCAN_TEST_REPORT", prelude_var: nil)
        raise ArgumentError, "give one of code, file: or command:" unless [code, file, command].compact.size == 1

        Dir.mktmpdir("loadscan-run") do |tmp|
          File.chmod(0o1777, tmp) if as_nobody # sticky, as /tmp: a cache dir below it stays trusted
          report = File.join(tmp, "report.marshal")
          stats = File.join(tmp, "stats.marshal")
          trace = File.join(tmp, "trace")
          if code
            file = File.join(tmp, "script.rb")
            File.write(file, PRELUDE + code)
          end
          full = { report_var => report, "LOADSCAN_TEST_STATS" => stats, "RUBYOPT" => nil, "RUBYLIB" => nil,
                   "LOADSCAN_CACHE_DIR" => File.join(tmp, "cache") }
          full["LOADSCAN_TEST_STOCK"] = "1" if loadscan == false
          opts = ruby_opts.dup
          if loadscan && prelude_var
            full[prelude_var] = File.join(tmp, "prelude.rb")
            File.write(full[prelude_var], LOADSCAN_PRELUDE)
          elsif loadscan
            opts += ["-r", SETUP]
          end
          cmd = bounded(command || [RbConfig.ruby, *opts, file, *args], timeout)
          full.merge!(env)
          # --seccomp-bpf: only the traced calls stop the process (a boot under strace takes twice as long without).
          cmd = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=openat", "-o", trace, *cmd] if strace
          cmd = %w[setpriv --reuid=nobody --regid=nogroup --clear-groups] + cmd if as_nobody
          stdout, stderr, status = read_process(full, cmd, chdir) { |pid| yield pid if block_given? }
          Result.new(report: load_marshal(report), stats: load_marshal(stats), stdout: stdout, stderr: stderr, status: status,
                     failed_opens: strace ? File.foreach(trace).count { |l| l.include?("= -1 E") } : nil)
        end
      end

      # Runs `cmd`, a program other than a Ruby run_ruby can start, with `env` added to this
      # process's environment and `timeout` (seconds, nil for none) as run_ruby's; never asserts:
      # [stdout, stderr, status].
      def capture(*cmd, env: {}, chdir: Dir.pwd, timeout: 60)
        read_process(env, bounded(cmd, timeout), chdir)
      end

      # `cmd` under `timeout` seconds, as the generators bound theirs (fixtures/bounded.rb).
      def bounded(cmd, seconds) = Fixtures.bounded(cmd, seconds)

      # Spawns `cmd` with no stdin and reads its stdout and stderr to the end; a block gets the
      # pid while it runs. [stdout, stderr, status].
      def read_process(env, cmd, chdir)
        Open3.popen3(env, *cmd, chdir: chdir) do |stdin, out, err, wait|
          stdin.close
          readers = [out, err].map { |io| Thread.new { io.read } }
          yield wait.pid if block_given?
          [*readers.map(&:value), wait.value]
        end
      end

      def load_marshal(path)
        File.exist?(path) && !File.zero?(path) ? Marshal.load(File.binread(path)) : nil # rubocop:disable Security/MarshalLoad
      end

      # Runs the same program stock and with loadscan (`loadscan_env` added to the latter's env)
      # and returns both results; both must exit 0.
      def run_both(code = nil, env: {}, loadscan_env: {}, **opts)
        stock = run_ruby(code, loadscan: false, env: env, **opts)
        fast = run_ruby(code, loadscan: true, env: env.merge(loadscan_env), **opts)
        assert stock.success?, "stock run failed (#{stock.status.inspect}):\n#{stock.stderr}"
        assert fast.success?, "loadscan run failed (#{fast.status.inspect}):\n#{fast.stderr}"
        [stock, fast]
      end
    end
  end
end
