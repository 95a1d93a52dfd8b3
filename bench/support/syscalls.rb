# frozen_string_literal: true

require "set"
require "fileutils"
require_relative "runner"
require_relative "fixtures"

module Bench
  # Failed file-system calls of one boot, by cause (bench/syscalls.rb, bench/gate).
  #
  # A boot runs under `strace -f -qq -e trace=<TRACE>` (every call, failed or not: the successful
  # opens say what was loaded when). Each FAILED call is given one cause, from its path alone and
  # from what the trace had opened before it; the boot's $LOAD_PATH (entries) comes from a stock
  # boot's report of the same fixture (fixtures/README.md, BOOT_REPORT), in load-path order:
  #
  # 0. before the prelude: every failed call before the prelude file is opened (stock loads the
  #    empty bench/preludes/stock.rb at the same point) — Ruby's startup, RubyGems, bundler/setup:
  #    no load-path cache set up in the prelude can answer those. Counted in the totals, and
  #    broken down by the causes below separately.
  # 1. own: the variant's own work, none of it a `require` — its cache dir (LOADSCAN_CACHE_DIR,
  #    BENCH_BOOTSNAP_DIR, or the Rails app's BOOTSNAP_CACHE_DIR, which holds Bootsnap's compile
  #    cache too), a load-path entry itself or one of its ancestors (a cache checking that
  #    an entry still is what it listed), an O_DIRECTORY open under an entry (listing). Stock has
  #    none; a cold boot's listing is here, so "cold, apart from the listing" = total − own.
  # 2. a path under an entry E that is E/F.rb or E/F.so (also .o, .bundle) is a probe for the
  #    feature F (longest entry first, so nested entries are right). F's winner W is what Ruby
  #    would load: the first entry with F.rb, else the first with F.so (the tree does not change
  #    during a boot, so the file system now answers for then);
  #    - miss: no entry has F at all (every entry probed for .rb and .so, nothing found);
  #    - re-require: W (or its realpath) was already opened successfully earlier in the trace, so
  #      F was loaded (or is being loaded) and is probed again;
  #    - left to Ruby: W not loaded yet: Ruby's own search, a partial sweep up to W.
  #    A failed stat-family call on E/D (no extension) is a check of the directory a missing
  #    feature would be in (loadscan stats it per application entry before raising a sure miss;
  #    stock and Bootsnap make none): miss,
  #    shown as "D/". (For a top-level feature that directory is the entry itself: "own".)
  # 3. rubygems: RubyGems' and Bundler's own probes: anything under a GEM_PATH dir that is not a
  #    feature probe (specifications/, gems/*/man for Bundler's MANPATH, extensions/, build_info),
  #    a *.gemspec, a .bundle dir, Gemfile/gems.rb lookups.
  # 4. outside: everything else — encodings, `ruby.so`-style relative spellings Ruby checks
  #    against $LOADED_FEATURES (`enumerator.so`, `thread.rb`: relative to the cwd), C-level
  #    rb_require of absolute paths, files Ruby's own runtime looks for (gconv, locale, …).
  #
  # Failed-call counts are a function of the tree and the boot (no timing, no randomness: lazily
  # listed directories and cache contents are the same from run to run), which bench/syscalls.rb
  # checks by running every variant twice.
  module Syscalls
    TRACE = %w[openat open stat lstat newfstatat statx access faccessat faccessat2].freeze
    OPENS = %w[openat open].freeze
    CAUSES = %w[miss re-require left_to_ruby rubygems outside own].freeze
    FEATURE_CAUSES = %w[miss re-require left_to_ruby].freeze
    EXTS = %w[.rb .so .o .bundle].freeze

    module_function

    # The boot's $LOAD_PATH (a stock boot's report), in order.
    def load_path(fx)
      @load_path ||= {}
      @load_path[fx[:root]] ||= begin
        out = File.join(OUT_DIR, "strace", "#{fx[:name]}-stock.report")
        FileUtils.mkdir_p(File.dirname(out))
        Runner.time_once(Fixtures.gem_env(fx).merge("BOOT_REPORT" => out), [RUBY, fx[:boot]])
        Marshal.load(File.binread(out))["load_path"].map { |e| File.expand_path(e) }.uniq # rubocop:disable Security/MarshalLoad
      end
    end

    # Sets the load path of a fixture not made by Bench::Fixtures (the Rails app).
    def set_load_path(fx, entries)
      (@load_path ||= {})[fx[:root]] = entries.map { |e| File.expand_path(e) }.uniq
    end

    # Features some C code requires (an extension's Init_ calling rb_require, Ruby's encoding
    # loader), found from stack traces: one boot of `variant` under `strace -f -k -Z` (failed calls
    # only, each with its C stack). A failed probe E/F.rb|.so is C-level when, going up its stack,
    # the first of rb_require_string/rb_require/rb_enc_find_index is rb_enc_find_index (an
    # encoding load), or the first rb_require_string/rb_require (Ruby 3.1: rb_require calls
    # rb_require_string; 3.4: rb_require calls require_internal itself) is called from a shared
    # object other than libruby and loadscan's own (an extension's Init_), or from libruby's
    # dln_load (an Init_ whose last call is rb_require, compiled as a jump). Kernel#require, whoever
    # decorates it, reaches rb_require_string from libruby (rb_f_require, rb_protect). The set is a
    # property of Ruby and the extensions, not of the variant: it is recorded once per fixture and
    # applied to every variant (a stack trace per failed call of a stock boot would take minutes).
    def record_c_features(fx, variant)
      log = File.join(OUT_DIR, "strace", "#{fx[:name]}-#{variant.name}-stacks.strace")
      FileUtils.mkdir_p(File.dirname(log))
      env = variant.env || {}
      system(env, "strace", "-f", "-qq", "-k", "-Z", "-o", log, "-e", "trace=#{TRACE.join(",")}", *variant.argv,
             out: File::NULL, err: File::NULL, chdir: fx.fetch(:chdir, Dir.pwd)) or raise "strace -k failed"
      entries = load_path(fx).sort_by { |e| -e.size }
      found = Set.new
      flush = lambda do |path, frames|
        next unless path

        entry = entries.find { |e| path.start_with?("#{e}/") } or next
        rel = path.delete_prefix("#{entry}/")
        next unless EXTS.include?(File.extname(rel))

        i = frames.index { |f| f.match?(/\((rb_require_string|rb_require|rb_enc_find_index)\+/) } or next
        c_level = if frames[i].include?("(rb_enc_find_index+")
                    true
                  else
                    j = i + 1
                    j += 1 while frames[j]&.match?(/\((rb_require_string|rb_require)\+/)
                    caller = frames[j].to_s
                    # dln_load: an Init_ that ends with `return rb_require(…)` leaves no frame of its own
                    !caller.empty? && (caller.include?("(dln_load+") || !caller.match?(%r{/libruby[^/]*\.so|/loadscan\.so}))
                  end
        found << rel.delete_suffix(File.extname(rel)) if c_level
      end
      path = nil
      frames = []
      File.foreach(log) do |l|
        if l.start_with?(" > ")
          frames << l
        else
          flush.(path, frames)
          path = l[/\A\d+\s+\w+\(\s*(?:AT_FDCWD,\s*)?"((?:[^"\\]|\\.)*)"/, 1]
          frames = []
        end
      end
      flush.(path, frames)
      (@c_features ||= {})[fx[:root]] = found
    end

    # Runs the variant once under strace (its `prepare` first) and classifies the failed calls.
    # `only`: syscalls to trace (default TRACE). Returns the log path and the classification.
    def measure(fx, variant, tag, only: TRACE)
      dir = File.join(OUT_DIR, "strace")
      FileUtils.mkdir_p(dir)
      log = File.join(dir, "#{fx[:name]}-#{variant.name}-#{tag}.strace")
      variant.prepare&.call
      env = variant.env || {}
      # the point where a cache could take over: stock loads the empty prelude there
      env = env.merge("BOOT_PRELUDE" => Fixtures.prelude("stock")) if env["BOOT_PRELUDE"].to_s.empty?
      ok = system(env, "strace", "-f", "-qq", "-o", log, "-e", "trace=#{only.join(",")}", *variant.argv,
                  out: File::NULL, err: File::NULL, chdir: fx.fetch(:chdir, Dir.pwd))
      raise "strace of #{variant.name} failed: #{variant.argv.join(" ")}" unless ok

      prelude = env["BOOT_PRELUDE"]
      own = [env["LOADSCAN_CACHE_DIR"], env["BENCH_BOOTSNAP_DIR"], env["BOOTSNAP_CACHE_DIR"]].compact.reject(&:empty?)
      gem_path = env.fetch("GEM_PATH", ENV["GEM_PATH"]).to_s.split(File::PATH_SEPARATOR) | Gem.path
      classify(log, entries: load_path(fx), own_dirs: own, gem_path: gem_path, prelude: prelude,
               c_features: (@c_features ||= {})[fx[:root]] || Set.new)
    end

    # {counts: {cause => {"openat" => n, "stat" => n}}, features: {cause => {feature => n}},
    #  paths: {cause => {sample path => n}}, failed_openat:, failed_stat:}
    def classify(log, entries:, own_dirs:, gem_path:, prelude: nil, c_features: Set.new)
      c = Classifier.new(entries, own_dirs, gem_path, prelude, c_features)
      pending = {}
      File.foreach(log) do |line|
        pid = line[/\A\d+/]
        if line.include?("<unfinished ...>")
          pending[pid] = line.sub(/\s*<unfinished \.\.\.>\s*\z/, "")
          next
        end
        if (m = line.match(/\A\d+\s+<\.\.\. \w+ resumed>\s*(.*)\z/m))
          head = pending.delete(pid) or next
          line = head + m[1]
        end
        c.call(line)
      end
      c.result
    end

    class Classifier
      def initialize(entries, own_dirs, gem_path, prelude, c_features)
        @c_features = c_features
        @entries = entries
        @by_length = entries.each_with_index.sort_by { |e, i| [-e.size, i] }.map(&:first)
        @ancestors = Set.new
        entries.each do |e|
          d = e
          loop do
            @ancestors << d
            up = File.dirname(d)
            break if up == d

            d = up
          end
        end
        @own = own_dirs.map { |d| File.expand_path(d) }
        @gem_path = gem_path.map { |d| File.expand_path(d) }
        @opened = Set.new
        @winner = {}
        @real = {}
        @counts = CAUSES.to_h { |k| [k, { "openat" => 0, "stat" => 0 }] }
        @features = CAUSES.to_h { |k| [k, { "openat" => Hash.new(0), "stat" => Hash.new(0) }] }
        @paths = CAUSES.to_h { |k| [k, { "openat" => Hash.new(0), "stat" => Hash.new(0) }] }
        @before = { "openat" => 0, "stat" => 0 }
        @before_by = CAUSES.to_h { |k| [k, { "openat" => 0, "stat" => 0 }] }
        @prelude = prelude
        @after = prelude.nil?
      end

      def call(line)
        name = line[/\A\d+\s+(\w+)\(/, 1] or return
        path = line[/\(\s*(?:AT_FDCWD,\s*)?"((?:[^"\\]|\\.)*)"/, 1] or return
        failed = line.match?(/\)\s+= -1 E[A-Z]+/)
        open = OPENS.include?(name)
        if !failed
          @opened << realpath(path) if open && EXTS.include?(File.extname(path))
          @after = true if open && path == @prelude
          return
        end
        kind = open ? "openat" : "stat"
        cause, feature = cause_of(path, line)
        unless @after
          @before[kind] += 1
          @before_by[cause][kind] += 1
          return
        end
        @counts[cause][kind] += 1
        if feature
          @features[cause][kind][feature] += 1
        else
          @paths[cause][kind][path] += 1
        end
      end

      def cause_of(path, line)
        abs = path.start_with?("/")
        return ["outside", nil] unless abs
        return ["own", nil] if @own.any? { |d| path == d || path.start_with?("#{d}/") } || @ancestors.include?(path)

        entry = @by_length.find { |e| path.start_with?("#{e}/") }
        if entry
          return ["own", nil] if line.include?("O_DIRECTORY")

          rel = path.delete_prefix("#{entry}/")
          ext = File.extname(rel)
          if EXTS.include?(ext)
            feature = rel.delete_suffix(ext)
            return ["outside", "#{feature} (from C)"] if @c_features.include?(feature)

            w = winner(feature)
            return ["miss", feature] unless w
            return ["re-require", feature] if @opened.include?(realpath(w)) || @opened.include?(w)

            return ["left_to_ruby", feature]
          end
          # a directory a feature would be in (loadscan's one stat per application entry before
          # it raises a sure miss): a miss when no entry has that directory
          return ["miss", "#{rel}/"] if !EXTS.include?(ext) && !OPENS.include?(line[/\A\d+\s+(\w+)/, 1])
        end
        return ["rubygems", nil] if rubygems?(path)

        ["outside", nil]
      end

      def rubygems?(path)
        path.end_with?(".gemspec") || path.include?("/.bundle") || path.match?(%r{/(Gemfile|gems\.rb)(\.lock)?\z}) ||
          @gem_path.any? { |d| path == d || path.start_with?("#{d}/") }
      end

      def winner(feature)
        @winner.fetch(feature) do
          w = %w[.rb .so].each do |ext|
            e = @entries.find { |x| File.file?("#{x}/#{feature}#{ext}") }
            break "#{e}/#{feature}#{ext}" if e
          end
          @winner[feature] = w.is_a?(String) ? w : nil
        end
      end

      def realpath(path)
        @real[path] ||= begin
          File.realpath(path)
        rescue SystemCallError
          path
        end
      end

      def result
        sum = ->(k) { @counts.sum { |_, v| v[k] } }
        { counts: @counts, features: @features.transform_values { |k| k.transform_values { |h| h.sort_by { |f, n| [-n, f] }.to_h } },
          paths: @paths.transform_values { |k| k.transform_values { |h| h.sort_by { |f, n| [-n, f] }.first(20).to_h } },
          before: @before, before_by_cause: @before_by, failed_openat: sum.("openat") + @before["openat"], failed_stat: sum.("stat") + @before["stat"] }
      end
    end

    # Total failed calls of a kind ("openat"/"stat"), leaving out some causes.
    def total(r, kind, except: [])
      r[:counts].sum { |cause, v| except.include?(cause) ? 0 : v[kind] } + (except.include?("before") ? 0 : r[:before][kind])
    end

    # One line per cause with calls: "miss 12 (fixture-optional-crt 6, …)".
    def breakdown(r, kind: "openat", top: 4)
      (r[:before][kind].zero? ? [] : ["before the prelude #{r[:before][kind]}"]) + CAUSES.filter_map do |cause|
        n = r[:counts][cause][kind]
        next if n.zero?

        what = r[:features][cause][kind].merge(r[:paths][cause][kind]).sort_by { |k, v| [-v, k] }
        "#{cause} #{n}" + (what.empty? ? "" : " (#{what.first(top).map { |k, v| "#{k} #{v}" }.join(", ")}#{what.size > top ? ", …" : ""})")
      end
    end
  end
end
