# frozen_string_literal: true

require "open3"
require "tempfile"

module Loadscan
  # `loadscan install`, run in an app's directory: the edits the README's "Use" and "Coming from
  # Bootsnap" sections describe, made for the user. The Gemfile gets `gem "loadscan"` if it has no
  # such line; config/boot.rb gets `require "loadscan/setup"` after `require "bundler/setup"`, and
  # a `require "bootsnap/setup"` becomes a Bootsnap setup that keeps its compile cache only (its
  # load-path cache would answer requires before loadscan). Only lines it recognizes are changed;
  # anything else in config/boot.rb about Bundler or Bootsnap makes it refuse, changing nothing.
  class Installer
    # A file's text before and after (`after == before`: nothing to change).
    Change = Struct.new(:path, :before, :after) do
      def changed? = before != after

      # `diff -u` of the change, the paths relative to the app.
      def diff
        Tempfile.create("loadscan-install") do |f|
          f.write(after)
          f.close
          out, = Open3.capture2("diff", "-u", "--label", "a/#{path}", "--label", "b/#{path}", "-", f.path, stdin_data: before)
          out
        end
      end
    end

    # config/boot.rb or the Gemfile are not what the installer knows how to edit: the message
    # says what it found and what to do by hand.
    class Refused < StandardError; end

    BUNDLER_SETUP = /\Arequire[ (]\s*["']bundler\/setup["']\s*\)?\s*(#.*)?\z/
    BOOTSNAP_SETUP = /\Arequire[ (]\s*["']bootsnap\/setup["']\s*\)?\s*(#.*)?\z/
    LOADSCAN_SETUP = %(require "loadscan/setup")
    # Bootsnap without its load-path cache (README, "Coming from Bootsnap").
    BOOTSNAP_COMPILE_CACHE = <<~RUBY
      require "bootsnap" # its compile cache only: loadscan answers require
      Bootsnap.setup(cache_dir: File.expand_path("../tmp/cache", __dir__), load_path_cache: false,
                     compile_cache_iseq: true, compile_cache_yaml: true)
    RUBY
    BY_HAND = "add the lines by hand (README: \"Use\" and \"Coming from Bootsnap\")"

    def initialize(dir)
      @dir = dir
    end

    # The changes to make, in order (Gemfile, config/boot.rb); raises Refused.
    def changes
      [gemfile, boot]
    end

    # Writes the changed files (each with one rename: a reader sees the old or the new file).
    def write(changes)
      changes.select(&:changed?).each do |change|
        path = File.join(@dir, change.path)
        tmp = "#{path}.loadscan-install#{Process.pid}"
        File.write(tmp, change.after)
        File.chmod(File.stat(path).mode & 0o7777, tmp)
        File.rename(tmp, path)
      end
    end

    private

    def read(rel)
      File.read(File.join(@dir, rel))
    rescue Errno::ENOENT
      raise Refused, "no #{rel} in #{@dir}: run `loadscan install` in the app's directory"
    end

    def gemfile
      text = read("Gemfile")
      return Change.new("Gemfile", text, text) if text.match?(/^\s*gem[ (]\s*["']loadscan["']/)

      # A Rails app loads the railtie (`rails loadscan:clear`, run by `rails tmp:clear`).
      rails = File.file?(File.join(@dir, "config", "application.rb"))
      line = %(gem "loadscan", require: #{rails ? '"loadscan/railtie"' : "false"} # a load-path cache for require\n)
      Change.new("Gemfile", text, "#{text}#{text.empty? || text.end_with?("\n") ? "" : "\n"}#{line}")
    end

    def boot
      rel = File.join("config", "boot.rb")
      text = read(rel)
      lines = text.lines
      only_line(lines, /bundler\/setup/, BUNDLER_SETUP, rel, "one top-level `require \"bundler/setup\"` line")
      lines = with_bootsnap_compile_cache_only(lines, rel)
      unless lines.any? { |l| l.include?("loadscan/setup") }
        lines.insert(lines.index { |l| l.chomp.match?(BUNDLER_SETUP) } + 1, "#{LOADSCAN_SETUP}\n")
      end
      Change.new(rel, text, lines.join)
    end

    # The index of the one line mentioning `mention`, which must match `form`; else Refused.
    def only_line(lines, mention, form, rel, expected)
      found = lines.each_index.select { |i| lines[i].match?(mention) && !lines[i].lstrip.start_with?("#") }
      return found.first if found.size == 1 && lines[found.first].chomp.match?(form)

      where = found.map { |i| "line #{i + 1}: #{lines[i].strip}" }.join("; ")
      raise Refused, "#{rel} is not a form loadscan install edits: expected #{expected}, found " \
                     "#{where.empty? ? "none" : where}; #{BY_HAND}"
    end

    # `require "bootsnap/setup"` replaced; a Bootsnap.setup already without the load-path cache
    # kept; any other use of Bootsnap: Refused.
    def with_bootsnap_compile_cache_only(lines, rel)
      code = lines.reject { |l| l.lstrip.start_with?("#") }
      return lines unless code.any? { |l| l.match?(/bootsnap/i) }
      return lines if code.join.match?(/Bootsnap\.setup\b[^#]*load_path_cache:\s*false/m)

      at = only_line(lines, /bootsnap/i, BOOTSNAP_SETUP, rel, "`require \"bootsnap/setup\"` (or a `Bootsnap.setup` " \
                                                              "with `load_path_cache: false`)")
      lines[0...at] + BOOTSNAP_COMPILE_CACHE.lines + lines[(at + 1)..]
    end
  end
end
