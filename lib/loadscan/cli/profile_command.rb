# frozen_string_literal: true

require "rbconfig"
require "tmpdir"
require "json"
require_relative "../profile"
require_relative "../profile/tree"
require_relative "../profile/report"
require_relative "../profile/html"
require_relative "child_boot"

module Loadscan
  class Profile
    # `loadscan profile [-- COMMAND]` (in cli/: a command's, never loaded by a boot): runs the app's boot (COMMAND, or the boot `doctor` runs:
    # `bin/rails runner nil` in a Rails app, else config/boot.rb or bundler/setup then
    # `Bundler.require`) in the app's directory with LOADSCAN_PROFILE set and the recorder
    # loaded first (`RUBYOPT=-r…/profile/boot/start.rb`), then prints the summary and writes the
    # speedscope JSON and the HTML page (`--output BASE`: BASE.json and BASE.html; by default
    # tmp/loadscan-profile.* in the app).
    class Command
      # The boot of an app without bin/rails: what config/boot.rb sets up, then the Gemfile's gems.
      BOOT_SCRIPT = <<~'RUBY'
        if File.file?("config/boot.rb") then load File.expand_path("config/boot.rb")
        elsif ENV["BUNDLE_GEMFILE"] || File.file?("Gemfile") then require "bundler/setup"
        end
        Bundler.require(:default) if defined?(Bundler) && Bundler.respond_to?(:require)
      RUBY

      attr_reader :tree, :wall_ms, :status, :json_path, :html_path

      def initialize(app:, command: [], output: nil, timeout: 600, env: ENV)
        @app = app
        @own_command = !command.empty?
        @command = @own_command ? command : default_command
        base = output || File.join(File.directory?(File.join(app, "tmp")) ? File.join(app, "tmp") : app, "loadscan-profile")
        @json_path = "#{base}.json"
        @html_path = "#{base}.html"
        @timeout = timeout
        @env = env
      end

      # Signals passed on to the boot while it runs (it is a process group of its own, out of the
      # terminal's reach): the command then waits for it and ends as it did.
      SIGNALS = %w[INT TERM HUP QUIT].freeze

      # Runs the boot and writes the files; true when the boot exited 0 and left its profile.
      # Raises Failed (one line) when the files cannot be written or the command cannot run.
      def run
        writable!
        File.delete(@json_path) if File.exist?(@json_path)
        started = Profile.wall
        @status = spawn_and_wait
        @wall_ms = Profile.wall - started
        return false unless File.file?(@json_path)

        json = File.read(@json_path, mode: "rb", encoding: Encoding::UTF_8) # whatever the locale
        @tree = Tree.from_speedscope(JSON.parse(json))
        Profile.replace(@html_path, HTML.page(json, @tree.name))
        @status.success?
      rescue SystemCallError, IOError, JSON::ParserError, KeyError, ArgumentError, NoMethodError, TypeError => e
        raise Failed.new(e.is_a?(SystemCallError) ? e.message.b.sub(/ @ \w+/, "") : "#{@json_path.b}: #{e.message.b.lines.first&.chomp}")
      end

      # The command could not do what it was asked: one line, and the exit status it ends with.
      class Failed < StandardError
        attr_reader :status

        def initialize(message, status = 1)
          super(message)
          @status = status
        end
      end

      # The exit status the command ends with: the boot's (128 + the signal that ended it, as a
      # shell says), 1 when it exited 0 and left no profile.
      def exit_status
        return 1 unless @status
        return @status.exitstatus.zero? && !@tree ? 1 : @status.exitstatus if @status.exited?

        128 + (@status.termsig || 9)
      end

      def command_line = @command.join(" ")

      def lines
        return ["loadscan profile: `#{command_line}` left no profile (#{how_it_ended})"] unless @tree

        [*Report.text(@tree), format("the process ran %.1f ms (%s)", @wall_ms, how_it_ended),
         "speedscope: #{@json_path} (open it at https://www.speedscope.app)", "page: #{@html_path}"]
      end

      # The summary as one Hash (`--json`): every gem, method, file and initializer, nothing cut.
      # Own times (`self_ms`) are without GC, `gc_ms` the GC in them; `total_ms` is with what
      # an entry loaded and ran, GC included (`total_gc_ms` of it).
      def summary
        return { "command" => command_line, "error" => how_it_ended } unless @tree

        { "command" => command_line, "exit" => @status.exitstatus, "process_ms" => @wall_ms.round(1), "total_ms" => @tree.total_ms.round(1),
          "gc_ms" => @tree.gc_ms.round(1), "outside_ms" => @tree.outside_ms.round(1), "samples" => @tree.samples,
          "gems" => @tree.gems.map { |g, s| { "gem" => g }.merge(s.transform_values { |v| v.is_a?(Float) ? v.round(2) : v }) },
          "calls" => @tree.calls.map { |c| c.transform_values { |v| v.is_a?(Float) ? v.round(2) : v } },
          "features" => @tree.features.map { |e| entry(e) }, "initializers" => @tree.initializers.map { |e| entry(e) },
          "json" => @json_path, "html" => @html_path }
      end

      private

      def entry(e)
        { "label" => e.label, "gem" => e.gem, "file" => e.file, "self_ms" => Tree.own(e).round(2), "gc_ms" => e.self_gc.round(2),
          "total_ms" => e.wall.round(2), "total_gc_ms" => e.gc.round(2), "allocated" => e.self_allocated }
      end

      def how_it_ended
        return "did not finish within #{@timeout} s" if @status.nil? || (!@status.exited? && @status.termsig == 9 && @timed_out)

        @status.exitstatus ? "exit #{@status.exitstatus}" : "signal #{@status.termsig}"
      end

      # The profile's files can be written (not a read-only app, an --output in a directory
      # that exists): checked before the boot runs, by making and removing a file beside them.
      def writable!
        [@json_path, @html_path].map { |path| File.dirname(path) }.uniq.each do |dir|
          probe = File.join(dir, ".loadscan-profile-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
          File.open(probe, File::WRONLY | File::CREAT | File::EXCL, 0o600).close
          File.unlink(probe)
        rescue SystemCallError => e
          raise Failed, "cannot write the profile in #{dir.b}: #{e.message.b.sub(/ @ .*/, "")} (--output BASE writes it elsewhere)"
        end
      end

      # Runs the command in a process group of its own (the timeout ends the whole group) and
      # waits for it; SIGNALS received meanwhile are passed on to the group, and the command
      # waits for the boot to end. A command that cannot run: Failed, with a shell's status
      # (127: not found, 126: not executable).
      def spawn_and_wait
        pid = nil
        pending = []
        handlers = SIGNALS.to_h do |sig|
          [sig, Signal.trap(sig) { pid ? pass_on(sig, pid) : pending << sig }]
        end
        begin
          pid = Process.spawn(child_env, *@command, chdir: @app, in: File::NULL, out: :err, pgroup: true)
        rescue SystemCallError => e
          raise Failed.new("cannot run `#{command_line.b}`: #{e.message.b.sub(/ - .*/, "").sub(/ @ .*/, "")}",
                           e.is_a?(Errno::ENOENT) ? 127 : 126)
        end
        pending.each { |sig| pass_on(sig, pid) }
        wait(pid)
      ensure
        handlers&.each { |sig, handler| Signal.trap(sig, handler || "DEFAULT") }
      end

      # The boot's status once it ended; past the timeout its group is killed first.
      def wait(pid)
        waiter = Process.detach(pid)
        unless waiter.join(@timeout)
          @timed_out = true
          pass_on("KILL", pid)
        end
        waiter.value
      end

      def pass_on(sig, pid)
        Process.kill(sig, -pid)
      rescue Errno::ESRCH, Errno::EPERM
        begin
          Process.kill(sig, pid)
        rescue Errno::ESRCH, Errno::EPERM
          nil
        end
      end

      def default_command
        if File.file?(File.join(@app, "bin/rails")) && File.file?(File.join(@app, "config/environment.rb"))
          [RbConfig.ruby, "bin/rails", "runner", "nil"]
        else
          [RbConfig.ruby, "-e", BOOT_SCRIPT]
        end
      end

      # The boot's environment, with the recorder loaded first. The default boot gets the app's
      # (ChildBoot.app_env: from before Bundler's setup, under `bundle exec` too, so the profile
      # sees Bundler set up where the boot sets it up); a command given after `--` runs in this
      # process's, as it was asked (`bundle exec loadscan profile -- rspec`: rspec under Bundler).
      def child_env
        env = @own_command ? {} : ChildBoot.app_env(@env)
        rubyopt = @own_command ? @env["RUBYOPT"] : env["RUBYOPT"]
        start = File.expand_path("../profile/boot/start.rb", __dir__)
        env.merge("LOADSCAN_PROFILE" => @json_path, "LOADSCAN_PROFILE_PARENT" => Process.pid.to_s,
                  "RUBYOPT" => "-r#{start} #{rubyopt}".strip)
      end
    end
  end
end
