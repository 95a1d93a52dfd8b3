# frozen_string_literal: true

module Loadscan
  # The boot profile (`loadscan profile`, `Loadscan.profile { … }`, `LOADSCAN_PROFILE=path`):
  # what each `require`, `require_relative`, `load` and autoload of the boot cost, as a tree.
  #
  # While a profile records, methods put in place of Kernel's (Profile::Hooks) time each of those
  # calls in the thread that started it: wall clock, process CPU, objects allocated and GC time
  # (GC's wall time, with the extension: `gc_time`), on the way in and on the way out. A call
  # that loaded nothing (`require` answering false) leaves no entry: its moment stays its
  # caller's. Bundler's setup and require and Rails' initializers are entries too
  # (Profile::Phases). The recorder keeps flat arrays; Profile::Tree makes the tree, the self
  # figures and the gems.
  #
  # Off, nothing of this is loaded. Once a profile has run in a process, `require` keeps one
  # branch more (`Profile.current` is nil): the hooks stay (see Profile::Hooks).
  #
  # A recording node, before Profile::Tree reads it:
  #
  #   [kind, label, file, parent, wall0, cpu0, alloc0, gc0, feature, wall1, cpu1, alloc1, gc1]
  #   [:require, "json", "/…/json-2.7/lib/json.rb", 0, 12_500_000, 11_000_000, 40_210, 0, nil, 19_250_000, 17_500_000, 52_001, 400_000]
  #
  # (`feature`, the object the call was given, while the entry is open; the label is its `to_s`;
  # times in nanoseconds, whole numbers: what the clocks give cheapest, as GC.total_time does.)
  class Profile
    SOURCE = __FILE__
    KIND, LABEL, FILE, PARENT, WALL0, CPU0, ALLOC0, GC0, FEATURE, WALL1, CPU1, ALLOC1, GC1 = (0..12).to_a
    # How old a CPU time reading may be, in wall nanoseconds, to stand for now (cpu_at).
    CPU_FRESH_NS = 20_000

    class << self
      # The profile recording now (nil when none).
      attr_reader :current

      # Records the block: returns a Profile::Tree (the block's own result is not kept). Inside
      # a profile already recording (LOADSCAN_PROFILE, `loadscan profile`), the block's entries
      # are that profile's too, and the tree returned is theirs alone.
      def run(name: "Loadscan.profile", &block)
        return @current.excerpt(name, &block) if @current

        profile = start(name: name)
        begin
          yield
        ensure
          profile.finish
        end
        profile.tree
      end

      # Starts recording from now (one profile at a time).
      def start(name:, startup: false)
        require_relative "profile/boot/hooks"
        require_relative "profile/boot/sampler"
        Sampler.native # the extension loaded before the profile starts (none of its time)
        profile = new(name: name, startup: startup)
        Hooks.attach
        @current = profile
        profile.sample
        profile
      end

      # Stops the current profile (called by Profile#finish).
      def stopped(profile)
        @current = nil if @current.equal?(profile)
      end

      # What LOADSCAN_PROFILE hands on to a program this one `exec`s (the same process): "pid:path"
      # (or "pid:-:path" when `loadscan profile` prints the summary). The variable itself is taken
      # out of ENV once read, so that the programs this one starts (`system`, spawn) do not write
      # the same file; one the program names itself for them is theirs.
      EXEC_VAR = "LOADSCAN_PROFILE_EXEC"
      # `loadscan profile` sets it to its pid beside LOADSCAN_PROFILE: its child prints no summary
      # (the command does). Taken out of ENV with LOADSCAN_PROFILE.
      PARENT_VAR = "LOADSCAN_PROFILE_PARENT"

      # LOADSCAN_PROFILE=path: records from now (loadscan's own load, as early as the boot
      # allows) to the process's exit, then writes `path` (the page when it ends in `.html`,
      # speedscope's JSON with loadscan's figures when in `.json`) and prints the summary on
      # stderr. Forked children (server workers) write nothing. A value that cannot be such a
      # file (`1`, a directory, a directory that does not exist) is one warning now, and the boot
      # goes on unprofiled.
      def start_from_env(value = ENV["LOADSCAN_PROFILE"], env: ENV)
        path, quiet = take_from_env(value, env)
        return if @current || path.nil?

        why = unwritable(path) and return warn_once(:path, "LOADSCAN_PROFILE=#{(value || path).b}: #{why.b}; the boot goes on unprofiled")

        env[EXEC_VAR] = "#{Process.pid}:#{"-:" if quiet}#{path}"
        name = [$PROGRAM_NAME, *ARGV].map { |arg| arg.to_s.dup.force_encoding(Encoding::UTF_8).scrub }.join(" ")
        profile = start(name: name, startup: true)
        owner = Process.pid
        at_exit do # registered first, so it runs last: after the app's own at_exit
          next unless Process.pid == owner

          ended = wall
          gc_was_off = GC.disable # at exit: no collection for what is written (a GC the app disabled stays so)
          begin
            profile.finish
            write(profile.tree, path, ended, summary: !quiet)
          rescue StandardError => e # a report: the program's exit status stays its own
            warn_once(:write, "could not write the profile to #{path.b}: #{e.class}: #{e.message.b.lines.first&.chomp}")
          ensure
            GC.enable unless gc_was_off
          end
        end
      end

      # The profile's path and whether its summary is left to `loadscan profile`, from
      # LOADSCAN_PROFILE (taken out of ENV) or from what a process this one replaced by `exec`
      # handed on; nil when this process is to write none.
      def take_from_env(value, env)
        handed = env[EXEC_VAR]
        env.delete("LOADSCAN_PROFILE") if value && env["LOADSCAN_PROFILE"] == value
        parent = value && env.delete(PARENT_VAR) # (the programs it starts may name a file of their own)
        if value && !value.empty?
          # `loadscan profile`'s child only (and what it execs: `bundle exec`), not its own children.
          return if parent && parent != Process.ppid.to_s

          return [File.expand_path(value), parent ? true : false]
        end
        return unless handed

        pid, rest = handed.split(":", 2)
        return unless pid == Process.pid.to_s && rest # another process's (this one's parent's)

        quiet = rest.start_with?("-:")
        [quiet ? rest.delete_prefix("-:") : rest, quiet]
      end

      # Why `path` cannot be the profile's file, or nil.
      def unwritable(path)
        return "#{path.b} is a directory" if File.directory?(path)
        return "#{path.b} is not a regular file (#{File.ftype(path)})" if File.exist?(path) && !File.file?(path)
        return "not a file to write the profile to (a path ending in .html for the page or .json for speedscope's JSON)" unless
          path.match?(/\.(?:html|json)\z/i)

        dir = File.dirname(path)
        return "the directory #{dir.b} does not exist" unless File.directory?(dir)
        return "#{(File.exist?(path) ? path : dir).b} is not writable" unless File.writable?(File.exist?(path) ? path : dir)

        nil
      end

      # Writes `tree` to `path` as its extension says, and prints the summary (unless `summary`
      # is false: `loadscan profile` prints it); a failure to write is one warning after it. Says
      # how long that took since `started` (the profile's end).
      def write(tree, path, started = wall, summary: true)
        require_relative "profile/report"
        require_relative "profile/speedscope" # (the page embeds its JSON; Unwritable below)
        begin
          if path.match?(/\.html\z/i)
            require_relative "profile/html"
            replace(path, HTML.render(tree))
          else
            replace(path, Speedscope.render(tree))
          end
          written = format("loadscan: profile written to %s in %.1f ms", path, wall - started)
        rescue SystemCallError, IOError, Speedscope::Unwritable => e
          failed = "could not write the profile to #{path.b}: #{e.message.b.sub(/ @ .*/m, "")}"
        end
        $stderr.puts(Report.text(tree), *written) if summary
        warn_once(:write, failed) if failed
      end

      # Writes `data` to a new file beside `path` (a symlink's target), then renames it over it:
      # a reader (or a process killed meanwhile) never sees half a profile.
      def replace(path, data)
        path = File.realpath(path) if File.symlink?(path) && File.exist?(path) # the link stays, its target is written
        tmp = "#{path}.#{Process.pid}-#{rand(1 << 32).to_s(16)}.tmp"
        File.open(tmp, File::WRONLY | File::CREAT | File::EXCL | File::BINARY, 0o666) { |f| f.write(data) }
        File.rename(tmp, path)
      ensure
        File.unlink(tmp) if tmp && File.exist?(tmp)
      end

      # One warning of each kind per process (Loadscan::Warnings would load the extension: the
      # profile starts before it, from profile/boot/start.rb).
      def warn_once(kind, message)
        (@warned ||= {})[kind] ||= Kernel.warn("loadscan: #{message}", uplevel: nil) || true
      end

      # Now, in milliseconds: the wall clock.
      def wall = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond)
    end

    attr_reader :name, :thread

    def initialize(name:, startup: false)
      @name = name
      @cpu_wall = -CPU_FRESH_NS
      @cpu = 0
      @thread = Thread.current
      @probe = nil
      @nodes = []
      @stack = []
      @tree = nil
      native = Sampler.native
      @gc_clock = native if native.respond_to?(:start_gc_clock) && native.start_gc_clock(GC.total_time)
      enter(:boot, name, nil)
      startup_node if startup
    end

    # Times the block as an entry of `kind` for `feature` (the feature as written, an
    # initializer's name); `file` is the file it loads when known before, else what `yield`
    # returns decides (see `leave`). Raised or thrown: the entry stays, marked.
    def measure(kind, feature, file = nil)
      index = open_entry(kind, feature, file) or return yield
      loaded_before = $LOADED_FEATURES.size
      finished = false
      result = yield
      finished = true
      result
    ensure
      leave(index, finished, result, loaded_before) if index
    end

    # Starts the stack sampler (Profile::Sampler): the time entries spend in other gems'
    # methods becomes entries of their own (:call).
    def sample
      @sampling = Sampler.start([SOURCE, Hooks::SOURCE])
    end

    # Ends the recording (the boot's entry closes now); idempotent.
    def finish
      return if @tree

      leave(@stack.first) until @stack.empty?
      self.class.stopped(self)
      samples = Sampler.stop if @sampling
      @gc_clock&.stop_gc_clock # (after the sampler: a sample reads the same clock)
      require_relative "profile/tree"
      @tree = Tree.new(@name, @nodes, samples: samples)
    end

    # The recorded tree (after finish).
    def tree = @tree || finish

    # Runs the block inside this recording (a `Loadscan.profile` within a profiled boot): its
    # entries stay this profile's, and the tree returned holds them alone, under a root of its
    # own named `name`. From another thread than the recording's (whose requires are not
    # entries), the tree holds the root only.
    def excerpt(name)
      first = @nodes.size
      mine = Thread.current.equal?(@thread) && !@tree
      wall0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      root = [:boot, name, nil, nil, wall0, cpu_at(wall0), GC.stat(:total_allocated_objects), gc_time, nil]
      begin
        yield
      ensure
        wall1 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
        root.push(wall1, cpu_at(wall1), GC.stat(:total_allocated_objects), gc_time)
      end
      nodes = mine ? @nodes.drop(first).map { |n| n.dup.tap { |c| c[PARENT] = c[PARENT] >= first ? c[PARENT] - first + 1 : 0 } } : []
      require_relative "profile/tree"
      Tree.new(name, [root, *nodes])
    end

    # `measure` for a hook that times the call in its own frame (`leave` in its `ensure`), so
    # that no frame of loadscan's stands between the caller and Ruby's require: Ruby's
    # bundled_gems warnings name the first caller that is not a `require`. The entry's index, or
    # nil for a call not to time: one from another thread, loadscan's probe (CoreExt's check that
    # `require` reaches it), or the same call passing through a second hook (one aliased by what
    # stands in front of the other: Ruby's bundled_gems), the entry already open. Called for
    # every `require` of the boot: each test is as cheap as it can be, the dearest last.
    def open_entry(kind, feature, file = nil)
      return unless Thread.current.equal?(@thread)

      top = @nodes[@stack.last]
      return if top[FEATURE].equal?(feature) && top[KIND] == kind
      return if feature.equal?(@probe ||= (::Loadscan::Native::PROBE if defined?(::Loadscan::Native::PROBE)))

      enter(kind, feature, file)
    end

    # Opens an entry under the one open now; returns its index for `leave`. The node has its
    # closing slots already (nil): a node never grows.
    def enter(kind, label, file)
      index = @nodes.size
      wall = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      @nodes << [kind, label, file, @stack.last, wall, cpu_at(wall), GC.stat(:total_allocated_objects), gc_time, label,
                 nil, nil, nil, nil]
      @stack << index
      index
    end

    # Closes the entry at `index` (and any the call left open: a `throw` through a hook that
    # never returned). A require that answered false loaded nothing: its entry goes, unless it
    # has entries under it.
    def leave(index, finished = true, result = true, loaded_before = nil)
      node = @nodes[index]
      if finished && result == false && @nodes.size == index + 1 && @stack.last == index && node[KIND] != :load
        @stack.pop
        return @nodes.pop
      end

      wall = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      cpu = cpu_at(wall)
      alloc = GC.stat(:total_allocated_objects)
      gc = gc_time
      while (top = @stack.pop)
        node = @nodes[top]
        node[FEATURE] = nil # the object itself is kept only while open
        node[WALL1] = wall
        node[CPU1] = cpu
        node[ALLOC1] = alloc
        node[GC1] = gc
        break if top == index
      end
      if !finished
        node[LABEL] = "#{node[LABEL]} (raised)"
      elsif node[FILE].nil? && loaded_before && $LOADED_FEATURES.size > loaded_before && node[KIND] != :phase
        node[FILE] = $LOADED_FEATURES.last # provided once loaded: the last one is this call's (a phase loads many: none)
      end
      Phases.check if node[KIND] != :boot # what the file defined: Bundler, Rails' initializers
    end

    private

    # GC's time so far (ns): its wall time from the extension's GC clock while this profile
    # records (ext/loadscan/src/profile/gc_clock.rs: the time in GC is then what an entry's wall
    # time loses to it, and its own time is wall less GC on one clock), else Ruby's GC.total_time
    # (the process's CPU time in GC: where a loaded machine pauses GC, its own time holds that).
    def gc_time = @gc_clock ? @gc_clock.gc_clock : GC.total_time

    # The process's CPU time at `wall` (nanoseconds): read (a system call, the profile's dearest
    # figure) unless the last reading is younger than CPU_FRESH_NS of wall time, then that
    # reading plus the wall time since (the error is below that bound per entry: a run of
    # requires that load nothing reads it once).
    def cpu_at(wall)
      return @cpu + (wall - @cpu_wall) if wall - @cpu_wall < CPU_FRESH_NS

      @cpu_wall = wall
      @cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)
    end

    # The process's life before the profile started (Ruby's own start, RubyGems, what ran before
    # loadscan was loaded), from the start time Linux keeps in /proc/self/stat (clock ticks since
    # boot, 10 ms each): the first entry, so the boot's total is the process's.
    def startup_node
      boot = @nodes.first
      ticks = File.read("/proc/self/stat").split(") ", 2).last.split[19].to_i
      since_start = Process.clock_gettime(Process::CLOCK_BOOTTIME, :nanosecond) - ticks * 10_000_000
      return unless since_start.positive? && since_start < 600_000_000_000

      started = boot[WALL0] - since_start
      @nodes << [:startup, "ruby's start (before the profile)", nil, 0, started, 0, 0, 0, nil,
                 boot[WALL0], boot[CPU0], boot[ALLOC0], boot[GC0]]
      boot[WALL0] = started
      boot[CPU0] = boot[ALLOC0] = boot[GC0] = 0
    rescue SystemCallError, IOError, ArgumentError, NoMethodError
      nil
    end
  end
end
