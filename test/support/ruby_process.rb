# frozen_string_literal: true

require "open3"

module Loadscan
  module TestSupport
    # Runs Ruby code in a fresh process, with or without loadscan, and returns what it reported.
    #
    # The script runs with `$LOAD_PATH` as given; loadscan is loaded by absolute path (never
    # through -I), so both runs have the same load path. The script reports by calling
    # `report(value)`; the value comes back Marshal'd.
    module RubyProcess
      Result = Struct.new(:report, :stdout, :stderr, :status, keyword_init: true)

      PRELUDE = <<~RUBY
        def report(value)
          File.binwrite(ENV.fetch("LOADSCAN_TEST_REPORT"), Marshal.dump(value))
        end
      RUBY

      # Our own files, which a boot with loadscan adds to $LOADED_FEATURES.
      def own_feature?(path)
        path.start_with?(File.join(Loadscan::TestSupport::LIB, "loadscan"))
      end

      # `as_nobody: true` runs the process as user nobody (where permissions must apply even
      # though the suite runs as root); the trees it reads must then be world-readable.
      def run_ruby(code, loadscan:, env: {}, chdir: Dir.pwd, args: [], ruby_opts: [], timeout: 60, as_nobody: false)
        Dir.mktmpdir("loadscan-run") do |tmp|
          File.chmod(0o1777, tmp) if as_nobody # sticky, as /tmp: a cache dir below it stays trusted
          script = File.join(tmp, "script.rb")
          report = File.join(tmp, "report.marshal")
          File.write(script, PRELUDE + code)
          opts = ruby_opts.dup
          opts += ["-r", File.join(Loadscan::TestSupport::LIB, "loadscan/setup.rb")] if loadscan
          # Each run gets a cold cache of its own unless the test passes LOADSCAN_CACHE_DIR.
          env = { "LOADSCAN_TEST_REPORT" => report, "RUBYOPT" => nil, "RUBYLIB" => nil,
                  "LOADSCAN_CACHE_DIR" => File.join(tmp, "cache") }.merge(env)
          cmd = ["timeout", timeout.to_s, RbConfig.ruby, *opts, script, *args]
          cmd = %w[setpriv --reuid=nobody --regid=nogroup --clear-groups] + cmd if as_nobody
          stdout, stderr, status = Open3.capture3(env, *cmd, chdir: chdir)
          value = File.exist?(report) ? Marshal.load(File.binread(report)) : nil # rubocop:disable Security/MarshalLoad
          Result.new(report: value, stdout: stdout, stderr: stderr, status: status)
        end
      end

      # Runs the same code with and without loadscan and returns both results; both must exit 0.
      def run_both(code, **opts)
        stock = run_ruby(code, loadscan: false, **opts)
        fast = run_ruby(code, loadscan: true, **opts)
        assert stock.status.success?, "stock run failed:\n#{stock.stderr}"
        assert fast.status.success?, "loadscan run failed:\n#{fast.stderr}"
        [stock, fast]
      end
    end
  end
end
