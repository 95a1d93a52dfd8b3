# frozen_string_literal: true

module Loadscan
  # A boot of the app in a child process, as `doctor`, `build` and `profile` run one: the
  # environment it gets, what it boots, and how it runs (a process group of its own, a timeout,
  # its stderr kept).
  module ChildBoot
    module_function

    # The environment a boot of the app gets (a Hash to spawn it with; nil unsets), from the
    # command's `env`. Where that is this process's ENV and Bundler is loaded here (the command's
    # own setup, `bundle exec`'s, a binstub's): the environment as it was before Bundler's setup
    # put RUBYOPT=-rbundler/setup and BUNDLER_SETUP in it, the boot's own, which loads Bundler
    # after loadscan where it is set up at the first line. What Bundler added is removed, not
    # inherited: RubyGems requires BUNDLER_SETUP at start, and a boot that inherits it has
    # Bundler set up before its first line, unseen by the compile cache and the index.
    def app_env(env)
      return env.to_h unless env.equal?(ENV) && defined?(::Bundler) && ::Bundler.respond_to?(:original_env)

      ENV.keys.to_h { [_1, nil] }.merge(::Bundler.original_env)
    end

    # What a boot of the app at `app` runs, with the child's `env`: a Rails app's whole boot
    # when `full` (config/environment.rb), else config/boot.rb, else Bundler's setup for a
    # Gemfile, else nothing (nil).
    def boot_file(app, env, full: false)
      if full && File.file?(File.join(app, "config/environment.rb")) then "config/environment.rb"
      elsif File.file?(File.join(app, "config/boot.rb")) then "config/boot.rb"
      elsif env["BUNDLE_GEMFILE"] || File.file?(File.join(app, "Gemfile")) then "bundler/setup"
      end
    end

    # Runs `cmd` in `chdir` in a process group of its own and returns its status (nil when it
    # did not exit within `timeout` seconds) and stderr. Then the group is killed: the boot when
    # it hangs, and whatever it left running, which may hold stderr open for its whole life.
    def run(env, cmd, chdir:, timeout:)
      reader, writer = IO.pipe
      pid = Process.spawn(env, *cmd, in: File::NULL, out: File::NULL, err: writer, pgroup: true, chdir: chdir)
      writer.close
      err = String.new
      draining = Thread.new { drain(reader, err) }
      waiter = Process.detach(pid)
      finished = waiter.join(timeout)
      kill_group(pid)
      status = waiter.value
      draining.join(1) # EOF once the group is gone, unless a process of another group holds the pipe
      [finished && status, err]
    ensure
      reader&.close
      draining&.join
    end

    # The last three lines of a child's stderr, on one line.
    def last_lines(err) = err.lines.last(3).map(&:strip).join(" | ")

    def kill_group(pgid)
      Process.kill(:KILL, -pgid)
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end

    # Reads `io` into `buffer` until its end or until it is closed, keeping the last MiB.
    def drain(io, buffer)
      loop do
        buffer << io.readpartial(1 << 16)
        buffer.slice!(0, buffer.bytesize - (1 << 20)) if buffer.bytesize > 1 << 20
      end
    rescue EOFError, IOError
      buffer
    end
  end
end
