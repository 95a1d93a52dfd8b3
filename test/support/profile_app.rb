# frozen_string_literal: true

require "json"
require "open3"
require "rbconfig"
require "fileutils"
require "tmpdir"
require_relative "paths"
require_relative "../../fixtures/bounded"
require_relative "../../lib/loadscan/version"
require_relative "../../lib/loadscan/profile"
require_relative "../../lib/loadscan/profile/tree"

module Loadscan
  module TestSupport
    # What the boot profile's tests share: the fixture gems (one whose top level sleeps 50 ms and
    # allocates 100,000 objects, and the gem it requires), a Bundler app using them, the boot's
    # end as a clock reading, speedscope's schema check and a headless Chromium.
    #
    #   make_profile_gems(dir)          # => dir/gems/slowgem, dir/gems/fastgem
    #   app = profile_app(dir)          # a Gemfile (loadscan, slowgem, fastgem), its lock, config/boot.rb
    #   speedscope_problems(json_path)  # => [] when the file passes speedscope's schema
    #   profile_entries(doc)            # the entries of a written profile (parsed), as Tree#to_h's
    #   dom = chromium_dom(html_path)   # the page after its script ran
    module ProfileApp
      # It times itself too (the tests compare), and says so at exit when SLOWGEM_MS names a file.
      SLOWGEM = <<~RUBY
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond)
        require "fastgem"
        sleep 0.05
        $slowgem = Array.new(100_000) { Object.new }
        $slowgem_ms = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond) - started
        at_exit { File.write(ENV["SLOWGEM_MS"], $slowgem_ms.to_s) if ENV["SLOWGEM_MS"] }
      RUBY
      # Where bin/setup puts speedscope's npm package (its schema).
      SCHEMA = File.join(ENV["XDG_CACHE_HOME"] || File.join(Dir.home, ".cache"), "loadscan", "npm",
                         "node_modules", "speedscope", "dist", "release", "file-format-schema.json")
      # Debian's python3 has python3-jsonschema (bin/setup); one on PATH may not.
      PYTHON = "/usr/bin/python3"
      CHROMIUM = "/usr/bin/chromium"
      # The process's end, on the clock the parent's spawn read (CLOCK_MONOTONIC is one clock for
      # every process): loaded before anything else, so its at_exit runs last.
      MARK_END = 'at_exit { File.write(ENV.fetch("PROFILE_TEST_END"), Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond).to_s) }'

      module_function

      # A method that keeps the CPU busy for `ms` of wall time, and says how long it took when
      # BUSYGEM_MS names a file (required by the app, called by one of its initializers).
      BUSYGEM = <<~RUBY
        module Busygem
          def self.work(ms)
            started = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond)
            n = 0
            n += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond) - started < ms
            took = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond) - started
            File.write(ENV["BUSYGEM_MS"], took.to_s) if ENV["BUSYGEM_MS"]
            n
          end
        end
      RUBY

      def make_profile_gems(dir)
        { "slowgem" => [SLOWGEM, ["fastgem"]], "fastgem" => ["$fastgem = true\n", []], "busygem" => [BUSYGEM, []] }.each do |name, (code, deps)|
          FileUtils.mkdir_p(File.join(dir, "gems", name, "lib"))
          File.write(File.join(dir, "gems", name, "lib", "#{name}.rb"), code)
          File.write(File.join(dir, "gems", name, "#{name}.gemspec"), <<~RUBY)
            Gem::Specification.new do |s|
              s.name = #{name.inspect}; s.version = "1.0.0"; s.summary = #{name.inspect}; s.authors = ["loadscan tests"]
              s.files = ["lib/#{name}.rb"]
              #{deps.map { |d| "s.add_dependency #{d.inspect}" }.join("\n  ")}
            end
          RUBY
        end
      end

      # The environment of a process of the app (the suite's Bundler settings left out).
      def app_env(app)
        clean = ENV.keys.select { |k| k.start_with?("BUNDLE_", "BUNDLER_", "LOADSCAN_") && !k.start_with?("LOADSCAN_TEST_") }
        clean.to_h { |k| [k, nil] }.merge("BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "RUBYOPT" => nil,
                                          "SLOWGEM_MS" => File.join(app, "tmp", "slowgem_ms"),
                                          "LOADSCAN_CACHE_DIR" => File.join(app, "tmp", "cache", "loadscan"))
      end

      # A Bundler app whose config/boot.rb sets loadscan up, with slowgem and fastgem in its Gemfile.
      def profile_app(dir)
        make_profile_gems(dir)
        FileUtils.mkdir_p(File.join(dir, "config"))
        FileUtils.mkdir_p(File.join(dir, "tmp"))
        File.write(File.join(dir, "Gemfile"), <<~RUBY)
          source "https://rubygems.org"
          gem "loadscan", path: #{ROOT.inspect}
          gem "slowgem", path: "gems/slowgem"
          gem "fastgem", path: "gems/fastgem"
        RUBY
        File.write(File.join(dir, "config", "boot.rb"), %(require "bundler/setup"\nrequire "loadscan/setup"\n))
        lock(dir, app_env(dir))
        dir
      end

      def lock(dir, env)
        out, status = Open3.capture2e(env, *Fixtures.bounded([RbConfig.ruby, Gem.bin_path("bundler", "bundle"), "lock", "--local"], 120),
                                      chdir: dir)
        raise "bundle lock failed in #{dir}:\n#{out}" unless status.success?
      end

      # `cmd` spawned now (its start as Linux recorded it) with LOADSCAN_PROFILE=`path` and the
      # recorder loaded first, as `loadscan profile` starts it; waits. With `mark_last:`, the
      # process writes its clock at its very end to that file (its first at_exit registered, so
      # the last run, after the profile's). [spawned at (ms), status, stderr].
      def spawn_profiled(env, cmd, chdir:, path:, mark_last: nil)
        start = File.join(LIB, "loadscan", "profile", "boot", "start.rb")
        rubyopt = "-r#{start}"
        if mark_last
          marker = File.join(File.dirname(mark_last), "mark_end.rb")
          File.write(marker, MARK_END)
          rubyopt = "-r#{marker} #{rubyopt}"
        end
        env = env.merge("LOADSCAN_PROFILE" => path, "RUBYOPT" => rubyopt, "PROFILE_TEST_END" => mark_last)
        spawned = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond)
        Open3.popen3(env, *cmd, chdir: chdir) do |stdin, out, err, wait|
          spawned = started_at(wait.pid) || spawned
          stdin.close
          readers = [out, err].map { |io| Thread.new { io.read } }
          status = wait.value
          [spawned, status, readers.map(&:value).last]
        end
      end

      # When process `pid` started, on CLOCK_MONOTONIC (ms), from the start time Linux keeps for
      # it (clock ticks since boot, 10 ms each: up to 10 ms early), or nil once it is gone. The
      # clock read before spawning comes earlier, by whatever delayed the fork on a loaded machine.
      def started_at(pid)
        ticks = File.read("/proc/#{pid}/stat").split(") ", 2).last.split[19].to_i
        since = Process.clock_gettime(Process::CLOCK_BOOTTIME, :float_millisecond) - ticks * 10.0
        Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond) - since
      rescue SystemCallError
        nil
      end

      # Why the file at `path` is not a speedscope file (its schema, from speedscope's own
      # package; and what the schema cannot say: every event in time order, each frame closed in
      # the order opened); nil when it is one, :no_checker when this machine lacks the schema or
      # the checker (bin/setup installs both).
      # The entries of a profile as written (speedscope's JSON, parsed), read back as
      # `loadscan profile` reads them (Tree.from_speedscope): Hashes, as Tree#to_h's. The
      # document holds each entry once: loadscan's arrays have an element per open event.
      def profile_entries(doc)
        opens = doc.fetch("profiles").first.fetch("events").count { |e| e["type"] == "O" }
        sizes = doc.fetch("loadscan").values_at("kind", "gem", "cpu", "allocated", "gc").map(&:size)
        raise "loadscan's arrays #{sizes.inspect}, #{opens} open events" unless sizes.uniq == [opens]

        Loadscan::Profile::Tree.from_speedscope(doc).to_h["entries"]
      end

      def speedscope_problems(path)
        return :no_checker unless File.file?(SCHEMA) && File.executable?(PYTHON)

        check = "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))"
        out, status = Open3.capture2e(PYTHON, "-c", check, path, SCHEMA)
        return "schema: #{out.lines.last(3).join}" unless status.success?

        doc = JSON.parse(File.read(path))
        open = []
        last = -Float::INFINITY
        doc["profiles"].first["events"].each do |e|
          return "event at #{e["at"]} before #{last}" if e["at"] < last

          last = e["at"]
          if e["type"] == "O" then open << e["frame"]
          elsif open.pop != e["frame"] then return "frame #{e["frame"]} closed out of order"
          end
        end
        open.empty? ? nil : "#{open.size} frames never closed"
      end

      # The page at `html` as headless Chromium renders it (its DOM once the script ran), with
      # no network and a fresh profile dir; nil without Chromium.
      def chromium_dom(html, screenshot: nil, size: "1200,800")
        return nil unless File.executable?(CHROMIUM)

        Dir.mktmpdir("loadscan-chromium") do |profile_dir|
          what = screenshot ? ["--screenshot=#{screenshot}", "--window-size=#{size}", "--hide-scrollbars"] : ["--dump-dom"]
          cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--user-data-dir=#{profile_dir}", *what, "file://#{html}"]
          out, err, status = Open3.capture3({ "HOME" => profile_dir }, *Fixtures.bounded(cmd, 120))
          raise "chromium failed (#{status.inspect}): #{err.lines.last(5).join}" unless status.success?

          out
        end
      end

      # slowgem's own figures: 50–60 ms of its own, as it timed itself (what the profile adds is a
      # hook's few microseconds around its require of fastgem), and ≥ 100,000 objects. Above 60 ms
      # only when its own clock says the machine kept it waiting longer (a loaded machine's time,
      # not the profile's).
      # slowgem's own clock (ms): 57 or less when the machine gave it a CPU when it asked.
      def slowgem_ms(app) = Float(File.read(File.join(app, "tmp", "slowgem_ms")))

      # slowgem is first among the files by self time, on a machine that ran it at speed (on a
      # loaded one every file that computes takes longer, its sleep does not: then among the
      # first five).
      def assert_slowgem_first(features, app)
        labels = features.map { |f| f["label"] }
        if slowgem_ms(app) <= 57
          assert_equal "slowgem", labels.first, features.first(3).inspect
        else
          assert_includes labels.first(5), "slowgem", "a loaded machine (slowgem's own clock: #{slowgem_ms(app)} ms)"
        end
      end

      def assert_slowgem(entry, app)
        own = slowgem_ms(app)
        assert_equal "slowgem", entry["label"]
        assert_operator entry["self_wall"], :>=, 50, entry.inspect
        # (a loaded machine may preempt it between its require's start and its first line)
        assert_in_delta own, entry["self_wall"], [3, own * 0.1].max, "slowgem's own clock said #{own} ms"
        assert_operator entry["self_wall"], :<=, 60, "slowgem's own clock said #{own} ms" if own <= 57
        assert_operator entry["self_allocated"], :>=, 100_000, entry.inspect
      end

      # An entry's own time without GC (Tree.own), as the rankings order them.
      def own(entry) = entry["self_wall"] - entry["self_gc"]

      # Milliseconds as the page shows them: its ms() rounds with Math.round(v * 10) / 10, which is
      # floor(x + 0.5), not printf's rounding of the binary value (80.85 is 80.9 there, 80.8 here).
      def page_ms(value)
        r = ((value * 10) + 0.5).floor / 10.0
        format("%.1f ms", r.zero? ? 0.0 : r)
      end

      # The first row of the page's "files by own time": [label, gem, own time as shown].
      def first_entry(dom)
        row = dom[%r{<tr class="entry">(.*?)</tr>}m, 1] or return nil
        %w[label gem num\ self].map { |cls| row[%r{<td class="#{cls}">([^<]*)</td>}, 1] }
      end
    end
  end
end
