# frozen_string_literal: true

require "socket"
require "net/http"
require "json"

module Loadscan
  module TestSupport
    module RailsApp
      # `bin/rails server` in a copy of the Rails app: Puma in cluster mode (its config/puma.rb:
      # 2 workers, the app preloaded, one thread each), on a free port of 127.0.0.1, asked until
      # each worker has answered /probe once.
      class Server
        Run = Struct.new(:answers, :master, :log, :status, :trace, keyword_init: true)

        # How long the server may take to listen, and how many rounds of two requests at once
        # it gets to answer from both workers.
        START_TIMEOUT = 180
        ROUNDS = 20

        def initialize(app, dir)
          @app = app
          @dir = dir
        end

        # Starts the server (stock when `loadscan: false`; under `strace -f` of its renames with
        # `trace: true`), collects each worker's first answer, stops it with SIGTERM to the master
        # and returns a Run: the answers by worker pid, the master's pid (Rails' pid file), the
        # server's output, its exit status and the strace lines.
        def run(loadscan:, env: {}, trace: false)
          label = loadscan ? "loadscan" : "stock"
          port = free_port
          paths = %w[pid log trace].to_h { |k| [k, File.join(@dir, "server-#{label}.#{k}")] }
          cmd = [RbConfig.ruby, "bin/rails", "server", "-b", "127.0.0.1", "-p", port.to_s, "-P", paths["pid"]]
          cmd = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=rename,renameat,renameat2", "-o", paths["trace"], *cmd] if trace
          full = RailsApp.env(@app).merge("PORT" => port.to_s, "LOADSCAN_TEST_STOCK" => ("1" unless loadscan)).merge(env)
          pid = Process.spawn(full, *cmd, chdir: @app, out: paths["log"], err: %i[child out], pgroup: true)
          waiter = Process.detach(pid)
          begin
            master = wait_until_listening(port, waiter, paths)
            answers = ask_each_worker(port)
          ensure
            status = stop(waiter, master)
          end
          Run.new(answers: answers, master: master, log: File.read(paths["log"]), status: status,
                  trace: trace ? File.readlines(paths["trace"]) : nil)
        end

        private

        def free_port
          server = TCPServer.new("127.0.0.1", 0)
          server.addr[1]
        ensure
          server&.close
        end

        # The master's pid once the port takes connections (the master binds it before forking).
        def wait_until_listening(port, waiter, paths)
          deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + START_TIMEOUT
          loop do
            raise "bin/rails server exited (#{waiter.value.inspect}):\n#{File.read(paths["log"])}" unless waiter.alive?

            begin
              TCPSocket.new("127.0.0.1", port).close
              return Integer(File.read(paths["pid"])) if File.file?(paths["pid"]) && !File.zero?(paths["pid"])
            rescue Errno::ECONNREFUSED
              nil
            end
            raise "bin/rails server is not listening after #{START_TIMEOUT} s:\n#{File.read(paths["log"])}" if
              Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

            sleep 0.2
          end
        end

        # Each worker's first answer, by its pid: two requests at a time, each holding its worker's
        # one thread for a moment, so that the second mostly goes to the other worker.
        def ask_each_worker(port)
          answers = {}
          ROUNDS.times do
            [0, 1].map { Thread.new { probe(port) } }.map(&:value).each { |a| answers[a.fetch("pid")] = a if a["call"] == 1 }
            return answers if answers.size >= 2
          end
          answers
        end

        def probe(port)
          # JSON: an error is then rendered as text, not as a page.
          headers = { "Accept" => "application/json", "Connection" => "close" }
          response = Net::HTTP.start("127.0.0.1", port, read_timeout: 60) { |http| http.get("/probe?sleep=0.5", headers) }
          raise "GET /probe: #{response.code}\n#{response.body[0, 2000]}" unless response.is_a?(Net::HTTPOK)

          JSON.parse(response.body)
        end

        # SIGTERM to the master (Puma stops its workers, then exits); KILL of the whole group if it
        # is not gone within a minute. Returns the exit status of what was spawned.
        def stop(waiter, master)
          begin
            Process.kill("TERM", master || waiter.pid) if waiter.alive?
          rescue Errno::ESRCH
            nil
          end
          Process.kill("KILL", -waiter.pid) unless waiter.join(60)
          waiter.value
        end
      end
    end
  end
end
