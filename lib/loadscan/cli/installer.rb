# frozen_string_literal: true

require_relative "installer/ruby_source"
require_relative "installer/app_file"
require_relative "installer/whole_file"
require_relative "installer/diff"
require_relative "installer/gemfile"
require_relative "installer/boot"
require_relative "installer/dockerfile"

module Loadscan
  # `loadscan install`, run in an app's directory: the edits the README's "Use", "Coming from
  # Bootsnap" and Docker paragraphs describe, made for the user. The Gemfile gets a top-level
  # `gem "loadscan"` unless every boot's bundle already has loadscan (Gemfile); config/boot.rb
  # gets `require "loadscan/setup"` after `require "bundler/setup"`, and Bootsnap's load-path
  # cache is turned off there (Boot); a Rails Dockerfile gets `loadscan build` and its boots'
  # settings (Dockerfile). Files are parsed, not matched line by line, and what the installer
  # does not recognise it refuses (Refused: nothing is written), except the Dockerfile, which it
  # then leaves alone with a note. Files are replaced atomically, all or none (AppFile).
  class Installer
    # A file's text before and after (`after == before`: nothing to change), and the file.
    Change = Struct.new(:path, :before, :after, :file) do
      def changed? = before != after

      # The change as a unified diff, the paths relative to the app (/dev/null for a file added
      # or removed).
      def diff
        text = Diff.unified(path, before, after)
        text = text.sub("--- a/#{path}\n", "--- /dev/null\n") if file.is_a?(NewFile)
        text = text.sub("+++ b/#{path}\n", "+++ /dev/null\n") if file.is_a?(RemovedFile)
        text
      end
    end

    # The app's files are not what the installer knows how to edit: the message says what it
    # found and what to do by hand.
    class Refused < StandardError; end

    BY_HAND = "add the lines by hand (README: \"Use\" and \"Coming from Bootsnap\")"

    # What the installer left alone and why (a Dockerfile it does not recognise).
    attr_reader :notes

    def initialize(dir)
      @dir = dir
      @notes = []
    end

    # The changes to make, in the order they are written (Gemfile, config/loadscan_boot.rb,
    # config/boot.rb, Dockerfile): a boot never requires loadscan before the Gemfile has it, nor
    # loads the first line's file before it is there. Raises Refused.
    def changes
      gemfile = required("Gemfile")
      boot = required(File.join("config", "boot.rb"))
      rails = File.file?(File.join(@dir, "config", "application.rb"))
      [Change.new(gemfile.rel, gemfile.text, Gemfile.after(gemfile.rel, gemfile.text, gemfile.eol, rails: rails, dir: @dir), gemfile),
       bootstrap, Change.new(boot.rel, boot.text, Boot.after(boot.rel, boot.text, boot.eol), boot), *dockerfile]
    end

    # What the first line of config/boot.rb loads (Boot::FIRST_LINE): this file, copied into the
    # app (it must be found before loadscan is).
    BOOTSTRAP = File.expand_path("installer/loadscan_boot.rb", __dir__)

    # `loadscan uninstall`: the changes that take loadscan out again, in the order they are
    # written (config/boot.rb first: no boot requires loadscan once the Gemfile lacks it):
    # config/boot.rb's lines, config/loadscan_boot.rb, the Gemfile's `gem "loadscan"` lines, the
    # Dockerfile's lines. (The lockfile's entry goes at the next `bundle install`; the cache dir:
    # cache_dir.) Raises Refused.
    def removals
      gemfile = required("Gemfile")
      boot = required(File.join("config", "boot.rb"))
      rel = File.join("config", Boot::BOOTSTRAP)
      bootstrap = AppFile.read(@dir, rel)
      [Change.new(boot.rel, boot.text, Boot.without(boot.rel, boot.text, boot.eol), boot),
       *([Change.new(rel, bootstrap.text, "", RemovedFile.new(bootstrap, File.join(@dir, rel)))] if bootstrap),
       Change.new(gemfile.rel, gemfile.text, Gemfile.without(gemfile.rel, gemfile.text, dir: @dir), gemfile),
       *dockerfile(undo: true)]
    end

    # The app's own cache dir (tmp/cache/loadscan, a directory, not a link), or nil.
    def cache_dir
      path = File.join(@dir, "tmp", "cache", "loadscan")
      path if File.lstat(path).directory?
    rescue SystemCallError
      nil
    end

    # Signals held back while files are replaced (then sent again), as Thread#raise and
    # Thread#kill are.
    SIGNALS = %w[INT TERM HUP].freeze

    # Writes the changed files: each new text into a file beside the old one first, then each
    # renamed over it, in order. Interrupts wait until all are renamed; on an error no file is
    # changed (the files renamed already are put back) and no new file is left behind.
    def write(changes)
      changes = changes.select(&:changed?)
      holding_signals do
        Thread.handle_interrupt(Object => :never) do
          changes.each { |change| change.file.stage(change.after) }
          committed = []
          begin
            changes.each { |change| change.file.commit.then { committed << change } }
          rescue StandardError => e
            unrestored = committed.reverse.filter_map do |change|
              change.file.restore
              nil
            rescue SystemCallError => failed
              failed.message
            end
            raise Refused, [e.message, *(unrestored.empty? ? "no file was changed" : unrestored)].join("; "), cause: nil
          end
        ensure
          changes.each { |change| change.file.discard }
        end
      end
    end

    # `lines` with `inserts` made (`{index => [line, ...]}`: before lines[index]), each line
    # ending with `eol`; a last line without an ending gets `eol` when lines come after it.
    def self.insert(lines, inserts, eol)
      lines = lines.dup
      inserts.sort.reverse_each do |index, added|
        lines[index - 1] = "#{lines[index - 1]}#{eol}" if index.positive? && !lines[index - 1].end_with?("\n")
        lines.insert(index, *added.map { |line| "#{line}#{eol}" })
      end
      lines.join
    end

    private

    # Runs the block with SIGNALS caught and noted (Thread.handle_interrupt does not hold back
    # signals), then puts the handlers back and sends each noted signal again, to be handled as
    # it would have been.
    def holding_signals
      caught = []
      handlers = {}
      SIGNALS.each { |sig| handlers[sig] = Signal.trap(sig) { caught << sig } } if Thread.current == Thread.main
      yield
    ensure
      handlers.each { |sig, handler| Signal.trap(sig, handler || "DEFAULT") }
      caught.uniq.each { |sig| Process.kill(sig, Process.pid) }
    end

    # config/loadscan_boot.rb as this loadscan writes it: added, or brought up to date.
    def bootstrap
      rel = File.join("config", Boot::BOOTSTRAP)
      text = File.read(BOOTSTRAP, mode: "rb").force_encoding(Encoding::UTF_8)
      file = AppFile.read(@dir, rel)
      file ? Change.new(rel, file.text, text, file) : Change.new(rel, "", text, NewFile.new(@dir, rel))
    end

    def required(rel)
      AppFile.read(@dir, rel) or raise Refused, "no #{rel} in #{@dir}: run `loadscan install` in the app's directory"
    end

    def dockerfile(undo: false)
      file = AppFile.read(@dir, "Dockerfile") or return []
      after, note = undo ? Dockerfile.without(file.rel, file.text) : Dockerfile.after(file.rel, file.text, file.eol)
      @notes << note if note
      [Change.new(file.rel, file.text, after, file)]
    rescue Refused => e
      @notes << "Dockerfile left as it is: #{e.message}"
      []
    end
  end
end
