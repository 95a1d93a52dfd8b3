# frozen_string_literal: true

require "optparse"
require_relative "cli/output"

module Loadscan
  # `loadscan` on the command line. Commands look at the load path the app's boot sets up:
  # run in the app's directory (or below it), they set Bundler up first when the app has a
  # Gemfile (as config/boot.rb does), then add `-I` dirs in front; the cache is the app's
  # (Loadscan::App, the boot's own rule). `--json` prints one JSON document per
  # command (the schema is in the README, "Command line"); paths are printed as Output says.
  class CLI
    COMMANDS = {
      "doctor" => "is `require` reaching loadscan in this app's boot? versions, cache, settings",
      "explain" => "FEATURE…  what loadscan answers and why, next to Ruby's own answer",
      "lookup" => "FEATURE…  loadscan's answer next to Ruby's, one line each",
      "build" => "list the app's whole load path and write the cache, then boot the app once to fill the compile cache (a Docker layer, a CI artifact)",
      "verify" => "check every feature the cache answers against Ruby's own search (exit 1 on a difference)",
      "stats" => "the figures of the app's last boot (requires answered, left to Ruby and why, cache use)",
      "problems" => "paths the scanner leaves to Ruby (loops, unreadable dirs, …)",
      "clear" => "delete the cache file and the last boot's figures (the next boot starts cold)",
      "profile" => "[-- COMMAND]  what each require and initializer of the boot costs: summary, speedscope JSON, HTML page",
      "install" => "set this app up: Gemfile, config/boot.rb (Bootsnap keeps its compile cache only), Dockerfile; shows the diff",
      "uninstall" => "take loadscan out of this app again (shows what it would change; --write changes it)",
    }.freeze

    # How long `doctor` lets the app's boot run, in seconds, unless --timeout says otherwise.
    DOCTOR_TIMEOUT = 60
    # How long `build` lets the boot that fills the compile cache run, unless --timeout says otherwise.
    BUILD_TIMEOUT = 600

    # A wrong command line: the message, exit 1.
    class Usage < StandardError; end

    def initialize(argv, out: $stdout, err: $stderr, env: ENV)
      # An argument that is not valid in its encoding (a path's bytes) as bytes: options parse it.
      @argv = argv.map { |arg| arg.valid_encoding? ? arg : arg.b }
      @out = out
      @err = err
      @env = env
      @json = false
      @dry_run = false
      @write = false
      @dirs = []
      @options = {}
      @timeout = nil # (--timeout; else each command's default)
    end

    # Runs the command line; returns the exit status.
    def run
      # Set up before the command line ran (RUBYOPT=-rloadscan/setup): it writes nothing at exit
      # unless `build` says so.
      Loadscan.setup(readonly: true) if Loadscan.active?
      catch(:done) { dispatch }
    end

    private

    def dispatch
      parser.parse!(@argv)
      command = @argv.shift or raise Usage, "no command given"
      raise Usage, "unknown command #{command.inspect} (commands: #{COMMANDS.keys.join(", ")})" unless COMMANDS.key?(command)
      raise Usage, "#{command} needs at least one FEATURE" if %w[explain lookup].include?(command) && @argv.empty?

      send(:"cmd_#{command}", @argv)
    rescue OptionParser::ParseError, Usage => e
      @err.puts("loadscan: #{e.message}", "Run `loadscan --help` for usage.")
      1
    end

    def parser
      OptionParser.new do |o|
        o.banner = "Usage: loadscan [options] COMMAND [ARGS]"
        o.separator ""
        o.separator "Commands:"
        COMMANDS.each { |name, what| o.separator(format("  %-10s %s", name, what)) }
        o.separator ""
        o.separator "Options:"
        o.on("-I DIR", "add DIR in front of the load path (-IDIR or -I DIR)") { |d| @dirs << File.expand_path(d) }
        o.on("--cache-dir DIR", "the cache directory (default: as LOADSCAN_CACHE_DIR or the app's tmp/cache/loadscan)") do |d|
          @options[:cache_dir] = File.expand_path(d)
        end
        o.on("--json", "print JSON") { @json = true }
        o.on("--dry-run", "install: show the changes, write nothing (uninstall's default)") { @dry_run = true }
        o.on("--write", "uninstall: make the changes it shows") { @write = true }
        o.on("--output BASE", "profile: write BASE.json and BASE.html (default: the app's tmp/loadscan-profile.*)") do |b|
          @output = File.expand_path(b)
        end
        o.on("--timeout SECONDS", Float, "doctor, build: how long the app's boot may take (default #{DOCTOR_TIMEOUT}; build: #{BUILD_TIMEOUT})") do |t|
          raise Usage, "--timeout needs a number of seconds above 0" unless t.positive? && t.finite?

          @timeout = t
        end
        o.on("-h", "--help", "this text") do
          @out.puts(o.help)
          throw :done, 0
        end
        o.on("--version", "loadscan's version") do
          @out.puts("loadscan #{VERSION}")
          throw :done, 0
        end
      end
    end

    # Sets the app's load path up (Bundler, when the app has a Gemfile, then -I dirs) and starts
    # loadscan on it, never writing the cache unless `write`; a Usage error says why it could not.
    def start(write: false, lazy: nil)
      bundler_setup
      @dirs.reverse_each { |d| $LOAD_PATH.unshift(d) }
      @setup = @options.merge(readonly: !write)
      @setup[:lazy] = lazy unless lazy.nil?
      return if Loadscan.setup(**@setup)

      raise Usage, Native.available? ? "loadscan is disabled (LOADSCAN_DISABLE)" : "the extension did not load: #{Native.load_error.message}"
    end

    def bundler_setup
      gemfile = App.gemfile(env: @env)
      return @bundler = nil unless gemfile

      require "bundler/setup"
      @bundler = gemfile
    rescue StandardError, LoadError => e
      @bundler = "#{gemfile} (Bundler failed: #{e.message.lines.first.chomp})"
    end

    # Prints `data` as JSON, or else the text (a line or lines) the block makes of it; the block
    # gets `data` with its strings as UTF-8 bytes, so paths from anywhere can be joined.
    def emit(data)
      data = Output.utf8(data)
      if @json
        @out.puts(Output.json(data))
      else
        text = yield(data)
        @out.puts(text.is_a?(Array) ? text.flatten.map { |line| Output.text(line) } : Output.text(text))
      end
    end

    # loadscan's answer (a path, :missing or :unknown) and Ruby's (a path or nil), comparable.
    def answers(feature)
      [Output.utf8(Loadscan.lookup(feature)), Output.utf8(ruby_answer(feature))]
    end

    def ruby_answer(feature)
      CoreExt::LoadPath.ruby_resolve_feature_path(feature)&.last
    rescue LoadError, ArgumentError, TypeError
      nil
    end

    def show(answer) = answer.is_a?(Symbol) ? answer.to_s : answer

    def cmd_lookup(features)
      start
      rows = features.map do |feature|
        ours, ruby = answers(feature)
        { "feature" => feature, "loadscan" => show(ours), "ruby" => ruby, "agree" => ours == :unknown || ours == (ruby || :missing) }
      end
      emit(rows) { |shown| shown.map { |r| "#{r["feature"]}\t#{r["loadscan"]}#{r["agree"] ? "" : "\truby: #{r["ruby"].inspect}"}" } }
      rows.all? { |r| r["agree"] } ? 0 : 1
    end

    def cmd_explain(features)
      start
      rows = features.map { |feature| explain(feature) }
      emit(rows) { |shown| explain_text(shown) }
      0
    end

    def explain_text(rows)
      rows.flat_map do |r|
        lines = ["#{r["feature"]}: #{r["loadscan"]}", "  ruby: #{r["ruby"] || "not found"}", "  why: #{r["why"]}"]
        lines += r["candidates"].map { |c| "  entry #{c["rank"]}: #{c["root"]} has #{c["kind"]}" }
        # Past the winning .rb (or a file named with its extension) nothing can change the answer.
        won = r["candidates"].find { |c| r["loadscan"].to_s.start_with?("#{c["root"]}/") }
        winner = won && (won["kind"] == "rb" || File.extname(r["feature"]) != "") ? won["rank"] : nil
        later = ->(rank) { winner && rank > winner ? " (after the answer: cannot change it)" : "" }
        lines += r["blind"].map { |b| "  blind spot in entry #{b["rank"]}: #{File.join(b["root"], b["dir"])}#{later.(b["rank"])}" }
        lines + r["deferred"].map { |d| "  not listed yet in entry #{d["rank"]}: #{File.join(d["root"], d["dir"])}#{later.(d["rank"])}" }
      end
    end

    def explain(feature)
      ours, ruby = answers(feature) # first: it lists the directories its answer depends on
      info = Native.explain(feature)
      row = { "feature" => feature, "loadscan" => show(ours), "ruby" => ruby,
              "candidates" => [], "blind" => [], "deferred" => [] }
      if info
        row["candidates"] = info[:candidates].map { |rank, root, kind| { "rank" => rank, "root" => root, "kind" => kind.to_s } }
        row["blind"] = info[:blind].map { |rank, root, dir| { "rank" => rank, "root" => root, "dir" => dir } }
        row["deferred"] = info[:deferred].map { |rank, root, dir| { "rank" => rank, "root" => root, "dir" => dir } }
      end
      row["why"] = if info.nil?
                     "not a feature searched on the load path (an absolute, ./ or ~ path): Ruby's require answers"
                   elsif ours == :missing
                     "no entry has it: require raises Ruby's LoadError (after asking the app's own directories)"
                   elsif ours == :unknown
                     "a blind spot comes first: Ruby's require answers"
                   else
                     "the first entry with #{feature.end_with?(".rb", ".so") ? "that file" : "a .rb (else a native extension)"} " \
                       "in $LOAD_PATH order, as Ruby searches: extension by extension, then entry by entry"
                   end
      row
    end

    def cmd_build(_args)
      start(write: true, lazy: false)
      relist_racy
      result = Loadscan.save
      # Read-only from here: the exit writes neither the cache again nor a last boot's record
      # (this is no boot of the app's; `loadscan stats` shows the app's own last boot).
      Loadscan.setup(**@setup, readonly: true)
      stats = Loadscan.stats
      data = { "cache_dir" => Loadscan.config.cache_dir, "result" => result.to_s, "entries" => stats[:load_path_entries],
               "features" => stats[:features], "bundler" => @bundler, "compile_cache" => fill_compile_cache }
      emit(data) do |d|
        ["#{result} #{d["cache_dir"]}: #{d["entries"]} entries, #{d["features"]} features#{d["bundler"] ? " (load path from #{d["bundler"]})" : ""}",
         compile_cache_line(d["compile_cache"])]
      end
      # (The exit status is the index's: a compile cache not filled is said, and costs a boot only its speed.)
      %i[written clean].include?(result) ? 0 : 1
    end

    # Boots the app once in a child (ChildBoot), its cache dir writable (LOADSCAN_READONLY=0), so
    # what the compile cache misses is compiled and written at that child's exit, under the
    # index's write rule: a Rails app by `bin/rails runner nil` (in its RAILS_ENV as set), any
    # other as `doctor` boots it. Returns what the boot's record says ("files": loaded through
    # the compile cache, "compiled", "bytes_written", "boot") or { "error" => why not filled }.
    # The boot's record is then taken back (the app's last boot's, if any, put back), as `build`
    # records no boot of its own.
    def fill_compile_cache
      return { "error" => "the compile cache is off (LOADSCAN_COMPILE_CACHE=0)" } unless Loadscan.config.compile_cache
      return { "error" => "no cache dir" } unless (dir = Loadscan.config.cache_dir)

      require_relative "cli/doctor"
      app = App.nearest || Dir.pwd
      # (Before Bundler's setup, here or `bundle exec`'s: ChildBoot.app_env.)
      env = ChildBoot.app_env(@env).merge("LOADSCAN_READONLY" => "0")
      env["LOADSCAN_CACHE_DIR"] = @options[:cache_dir] if @options[:cache_dir]
      rails = File.file?(File.join(app, "bin", "rails")) && File.file?(File.join(app, "config", "application.rb"))
      Dir.mktmpdir("loadscan-build") do |tmp|
        out = File.join(tmp, "report")
        boot, cmd = if rails
                      ["bin/rails runner nil (#{env["RAILS_ENV"] || env["RACK_ENV"] || "development"})",
                       [RbConfig.ruby, *@dirs.flat_map { |d| ["-I", d] }, "bin/rails", "runner", "nil"]]
                    else
                      file = ChildBoot.boot_file(app, env)
                      [file || "no boot", Doctor.boot_command(@dirs, out, file, nil, "0")]
                    end
        timeout = @timeout || BUILD_TIMEOUT
        last = File.join(dir, Native::LAST_BOOT_FILE)
        previous = (File.binread(last) if File.file?(last))
        status, err = ChildBoot.run(env, cmd, chdir: app, timeout: timeout)
        return { "error" => "#{boot} had not finished after #{format("%g", timeout)} s and was stopped" } unless status

        unless status.success?
          how = status.exitstatus ? "exit #{status.exitstatus}" : "signal #{status.termsig}"
          return { "error" => "#{boot} failed: #{[how, ChildBoot.last_lines(err)].reject(&:empty?).join(": ")}" }
        end
        report = if rails then {}
                 elsif File.file?(out) then Marshal.load(File.binread(out)) # rubocop:disable Security/MarshalLoad -- our own child wrote it
                 else { "boot_error" => "it reported nothing" }
                 end
        return { "error" => "#{boot} failed: #{report["boot_error"]}" } if report["boot_error"]

        compile_cache_filled(dir, status.pid, boot, report, err, previous)
      end
    end

    # The child's record of its boot (LastBoot), read and removed: its compile cache's figures.
    def compile_cache_filled(dir, pid, boot, report, err, previous)
      record = LastBoot.read(dir)
      record = nil unless record && record["pid"] == pid
      put_back(File.join(dir, Native::LAST_BOOT_FILE), previous) if record
      if !record || report["set_up_by_boot"] == false
        return { "error" => "#{boot} does not set loadscan up (`loadscan install` adds it)#{record ? "" : ", or it recorded nothing"}" }
      end

      figures = record["compile_cache"]
      return { "error" => "#{boot} had no compile cache (off, or not supported by this Ruby)" } unless figures.is_a?(Hash)

      compiled = figures["misses"].to_i
      if compiled.positive? && figures["bytes_written"].to_i.zero?
        return { "error" => "#{boot} wrote nothing: #{ChildBoot.last_lines(err).then { |l| l.empty? ? "no warning" : l }}" }
      end

      { "boot" => boot, "files" => figures["hits"].to_i + compiled, "compiled" => compiled, "bytes_written" => figures["bytes_written"].to_i }
    rescue SystemCallError => e
      { "error" => "#{boot}: #{e.message}" }
    end

    # The app's last boot's record as it was before build's boot (none: removed), written whole.
    def put_back(path, previous)
      return File.delete(path) unless previous

      File.binwrite("#{path}.build", previous)
      File.rename("#{path}.build", path)
    end

    def compile_cache_line(filled)
      return "compile cache not filled: #{filled["error"]}" if filled["error"]

      "compile cache: #{filled["files"]} files from #{filled["boot"]} (#{filled["compiled"]} compiled now, " \
        "#{format("%.0f KB", filled["bytes_written"] / 1024.0)} written)"
    end

    # Directories changed just before the build (a Docker `COPY`) are racy: a boot would list
    # them again, every boot of a cache only ever read. Waits out their window (about a second
    # after the last change) and lists them again, so the cache written is used whole.
    def relist_racy
      while (wait = Native.relist_racy)
        sleep(wait)
      end
    end

    def cmd_verify(_args)
      start
      stems = Native.stems
      wrong = stems.filter_map do |stem|
        ours, ruby = answers(stem)
        next if ours == :unknown

        { "feature" => stem, "loadscan" => show(ours), "ruby" => ruby } unless ours == (ruby || :missing)
      end
      emit({ "checked" => stems.size, "disagree" => wrong }) do |d|
        ["#{stems.size} features checked against Ruby's own search, #{wrong.size} disagree",
         *d["disagree"].map { |w| "#{w["feature"]}\t#{w["loadscan"]}\truby: #{w["ruby"].inspect}" }]
      end
      wrong.empty? ? 0 : 1
    end

    # The app's cache dir, as its boot would pick it (`--cache-dir`, the app's environment), or nil.
    def app_cache_dir
      Config.app_cache_dir(**@options.slice(:cache_dir), env: @env, running: nil)
    end

    def cmd_stats(_args)
      raise Usage, "the extension did not load: #{Native.load_error.message}" unless Native.available?

      dir = app_cache_dir or raise Usage, "no cache configured"
      last = LastBoot.read(dir)
      unless last
        emit({ "cache_dir" => dir, "last_boot" => nil }) do |d|
          "no boot recorded in #{d["cache_dir"]} yet (a boot with loadscan records its figures there at exit)"
        end
        return 1
      end
      emit({ "cache_dir" => dir, "last_boot" => last }) do |d|
        [LastBoot.describe(d["last_boot"]), *(LastBoot.describe_gc(d["last_boot"]["gc"]) if d["last_boot"]["gc"].is_a?(Hash)),
         *LastBoot.describe_compile_cache(d["last_boot"]["compile_cache"])]
      end
      0
    end

    def cmd_problems(_args)
      start
      problems = Loadscan.problems
      emit(problems.map { |kind, message| { "kind" => kind.to_s, "message" => message } }) do |rows|
        rows.map { |r| "#{r["kind"]}\t#{r["message"]}" }
      end
      0
    end

    def cmd_clear(_args)
      dir = app_cache_dir
      return emit({ "removed" => [] }) { "no cache configured" } || 0 unless dir

      raise Usage, "the extension did not load: #{Native.load_error.message}" unless Native.available?

      removed = Native.clear_cache(dir)
      unless removed.is_a?(Array) # why it could not: one line, and nothing else said
        @err.puts(Output.text("loadscan clear: #{Output.utf8(removed)}"))
        return 1
      end
      emit({ "cache_dir" => dir, "removed" => removed }) do |d|
        d["removed"].empty? ? "nothing to remove in #{d["cache_dir"]}" : d["removed"].map { |path| "removed #{path}" }
      end
      0
    end

    def cmd_install(_args)
      require_relative "cli/installer"
      installer = Installer.new(Dir.pwd)
      changes = installer.changes.select(&:changed?)
      diff = changes.map(&:diff).join # before writing: nothing after it can fail
      installer.write(changes) unless @dry_run
      data = { "dry_run" => @dry_run, "changed" => changes.map(&:path), "diff" => diff, "notes" => installer.notes }
      emit(data) { |d| [*d["diff"].lines.map(&:chomp), *d["notes"], install_summary(changes.map(&:path))] }
      0
    rescue Installer::Refused, SystemCallError => e
      @err.puts("loadscan install: #{e.message}")
      1
    end

    def install_summary(changed)
      if changed.empty? then "nothing to change: loadscan is set up in Gemfile and config/boot.rb"
      elsif @dry_run then "--dry-run: nothing written"
      else "changed #{changed.join(", ")}#{changed.include?("Gemfile") ? "; now run `bundle install`" : ""}"
      end
    end

    # Takes out what `install` put in (README, "Undo an install"): config/boot.rb's lines,
    # config/loadscan_boot.rb, the Gemfile's `gem "loadscan"` lines, the Dockerfile's lines, and
    # the app's cache dir. Shows the changes; writes them only with --write (and not with
    # --dry-run). The lockfile loses loadscan at the next `bundle install`.
    def cmd_uninstall(_args)
      require_relative "cli/installer"
      require "fileutils"
      installer = Installer.new(Dir.pwd)
      changes = installer.removals.select(&:changed?)
      cache = installer.cache_dir
      write = @write && !@dry_run
      diff = changes.map(&:diff).join
      if write
        installer.write(changes)
        FileUtils.rm_rf(cache) if cache
      end
      data = { "dry_run" => !write, "changed" => changes.map(&:path), "diff" => diff,
               "cache_dir" => cache && File.join("tmp", "cache", "loadscan"), "notes" => installer.notes }
      emit(data) { |d| [*d["diff"].lines.map(&:chomp), *d["notes"], uninstall_summary(d)] }
      0
    rescue Installer::Refused, SystemCallError => e
      @err.puts("loadscan uninstall: #{e.message}")
      1
    end

    def uninstall_summary(data)
      removed = [*data["changed"], *(data["cache_dir"] && "#{data["cache_dir"]}/")]
      if removed.empty? then "nothing to change: loadscan is not in Gemfile, config/boot.rb or the Dockerfile"
      elsif data["dry_run"] then "nothing written: run `loadscan uninstall --write` to change #{removed.join(", ")}"
      else "changed #{removed.join(", ")}#{data["changed"].include?("Gemfile") ? "; now run `bundle install`" : ""}"
      end
    end

    def cmd_profile(command)
      require_relative "cli/profile_command"
      profile = Profile::Command.new(app: App.nearest || Dir.pwd, command: command, output: @output,
                                     timeout: @timeout || DOCTOR_TIMEOUT, env: @env)
      profile.run
      emit(profile.summary) { profile.lines }
      profile.exit_status
    rescue Profile::Command::Failed => e
      @err.puts(Output.text("loadscan profile: #{e.message}"))
      e.status
    end

    def cmd_doctor(_args)
      require_relative "cli/doctor"
      Doctor.new(cli_dirs: @dirs, options: @options, env: @env, timeout: @timeout || DOCTOR_TIMEOUT).report.then do |report|
        emit(report) { |r| Doctor.text(r) }
        report["ok"] ? 0 : 1
      end
    end
  end
end
