# frozen_string_literal: true

module Loadscan
  # `loadscan` on the command line: look at what the index answers for this Ruby's load path
  # (plus any -I dirs), and manage the cache.
  class CLI
    USAGE = <<~TEXT
      Usage: loadscan [-I DIR]... COMMAND [ARGS]
        lookup FEATURE...   what `require FEATURE` would load, per loadscan and per Ruby
        stats               entries, features and cache use for this load path
        problems            paths the scanner left to Ruby (loops, unreadable dirs, …)
        clear               delete the cache file (LOADSCAN_CACHE_DIR or tmp/cache/loadscan)
    TEXT

    def initialize(argv, out: $stdout, err: $stderr)
      @argv = argv.dup
      @out = out
      @err = err
    end

    def run
      while @argv.first == "-I"
        @argv.shift
        $LOAD_PATH.unshift(File.expand_path(@argv.shift.to_s))
      end
      command = @argv.shift
      case command
      when "lookup" then lookup(@argv)
      when "stats" then start && @out.puts(Loadscan.stats.map { |k, v| "#{k}: #{v}" })
      when "problems" then start && Loadscan.problems.each { |kind, message| @out.puts("#{kind}\t#{message}") }
      when "clear" then clear
      else
        @err.puts(USAGE)
        return command.nil? || command == "help" ? 0 : 2
      end
      0
    end

    private

    def start
      Loadscan.setup(readonly: true) || abort("loadscan is not active (LOADSCAN_DISABLE, or the extension did not load)")
    end

    def lookup(features)
      start
      features.each do |feature|
        ruby = CoreExt::LoadPath.ruby_resolve_feature_path(feature)&.last
        ours = Loadscan.lookup(feature)
        agree = ours == :unknown || ours == (ruby || :missing)
        @out.puts("#{feature}\t#{ours}#{agree ? "" : "\truby: #{ruby.inspect}"}")
      end
    end

    def clear
      dir = Config.new.cache_dir or return @out.puts("no cache configured")
      path = File.join(dir, "index")
      File.delete(path) if File.exist?(path)
      @out.puts("removed #{path}")
    end
  end
end
