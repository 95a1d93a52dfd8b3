# frozen_string_literal: true

require "rbconfig"
require "tmpdir"
require "json"
require_relative "../profile"
require_relative "../profile/tree"
require_relative "../profile/report"
require_relative "../profile/html"

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
        @command = command.empty? ? default_command : command
        base = output || File.join(File.directory?(File.join(app, "tmp")) ? File.join(app, "tmp") : app, "loadscan-profile")
        @json_path = "#{base}.json"
        @html_path = "#{base}.html"
        @timeout = timeout
        @env = env
      end

      # Runs the boot and writes the files; true when the boot exited 0 and left its profile.
      def run
        File.delete(@json_path) if File.exist?(@json_path)
        started = Profile.wall
        pid = Process.spawn(child_env, *@command, chdir: @app, in: File::NULL, out: :err, pgroup: true)
        waiter = Process.detach(pid)
        unless waiter.join(@timeout)
          Process.kill(:KILL, -pid) rescue nil # rubocop:disable Style/RescueModifier
        end
        @status = waiter.value
        @wall_ms = Profile.wall - started
        return false unless File.file?(@json_path)

        json = File.read(@json_path)
        @tree = Tree.from_speedscope(JSON.parse(json))
        File.write(@html_path, HTML.page(json, @tree.name))
        @status.success?
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
        return "did not finish within #{@timeout} s" if @status.nil? || (!@status.exited? && @status.termsig == 9)

        @status.exitstatus ? "exit #{@status.exitstatus}" : "signal #{@status.termsig}"
      end

      def default_command
        if File.file?(File.join(@app, "bin/rails")) && File.file?(File.join(@app, "config/environment.rb"))
          [RbConfig.ruby, "bin/rails", "runner", "nil"]
        else
          [RbConfig.ruby, "-e", BOOT_SCRIPT]
        end
      end

      def child_env
        start = File.expand_path("../profile/boot/start.rb", __dir__)
        { "LOADSCAN_PROFILE" => @json_path, "LOADSCAN_PROFILE_PARENT" => Process.pid.to_s,
          "RUBYOPT" => "-r#{start} #{@env["RUBYOPT"]}".strip }
      end
    end
  end
end
