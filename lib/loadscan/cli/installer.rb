# frozen_string_literal: true

require_relative "installer/ruby_source"
require_relative "installer/app_file"
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

      # The change as a unified diff, the paths relative to the app.
      def diff = Diff.unified(path, before, after)
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

    # The changes to make, in the order they are written (Gemfile, config/boot.rb, Dockerfile):
    # a boot never requires loadscan before the Gemfile has it. Raises Refused.
    def changes
      gemfile = required("Gemfile")
      boot = required(File.join("config", "boot.rb"))
      rails = File.file?(File.join(@dir, "config", "application.rb"))
      [Change.new(gemfile.rel, gemfile.text, Gemfile.after(gemfile.rel, gemfile.text, gemfile.eol, rails: rails, dir: @dir), gemfile),
       Change.new(boot.rel, boot.text, Boot.after(boot.rel, boot.text, boot.eol), boot), *dockerfile]
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

    def required(rel)
      AppFile.read(@dir, rel) or raise Refused, "no #{rel} in #{@dir}: run `loadscan install` in the app's directory"
    end

    def dockerfile
      file = AppFile.read(@dir, "Dockerfile") or return []
      after, note = Dockerfile.after(file.rel, file.text, file.eol)
      @notes << note if note
      [Change.new(file.rel, file.text, after, file)]
    rescue Refused => e
      @notes << "Dockerfile left as it is: #{e.message}"
      []
    end
  end
end
