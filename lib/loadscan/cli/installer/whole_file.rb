# frozen_string_literal: true

module Loadscan
  class Installer
    # A file the installer adds (config/loadscan_boot.rb), written as AppFile replaces one: the
    # text into a new file beside it first (`stage`), renamed into place (`commit`). Its mode is
    # what the umask gives a new file; its owner its directory's where the installer may give it
    # (run as root on a user's app, the file is the user's, as the files it edits stay theirs).
    class NewFile
      attr_reader :rel

      def initialize(dir, rel)
        @rel = rel
        @path = File.join(dir, rel)
      end

      def stage(text)
        raise Refused, "#{rel} appeared while loadscan install ran: run it again" if File.exist?(@path) || File.symlink?(@path)

        dir = File.dirname(@path)
        tmp = File.join(dir, ".#{File.basename(@path)}.loadscan-install-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
        File.open(tmp, File::WRONLY | File::CREAT | File::EXCL | File::BINARY, 0o666) do |f|
          @staged = tmp
          f.write(text)
          owner(f, File.stat(dir))
          f.fsync
        end
      rescue SystemCallError => e
        raise e.class, "adding #{@path} (by a new file beside it: #{File.basename(tmp)})", cause: nil if tmp && e.message.include?(tmp)

        raise
      end

      def commit
        File.rename(@staged, @path)
        @staged = nil
      end

      # Takes the added file out again (a later file could not be written).
      def restore
        File.unlink(@path)
      end

      def discard
        File.unlink(@staged) if @staged
      rescue Errno::ENOENT
        nil
      ensure
        @staged = nil
      end

      private

      # The directory's owner, and the mode the umask gives (chown clears setuid and setgid bits).
      def owner(file, dir)
        own = file.stat
        return if own.uid == dir.uid && own.gid == dir.gid

        mode = own.mode & 0o7777
        file.chown(dir.uid, dir.gid)
        file.chmod(mode)
      rescue Errno::EPERM
        nil # not root: the file is the installer's, as any file the user makes there
      end
    end

    # A file `loadscan uninstall` removes (config/loadscan_boot.rb): checked unchanged since read
    # when staged, moved aside at commit (back by `restore`), unlinked by `discard`.
    class RemovedFile
      attr_reader :rel

      def initialize(file, path)
        @rel = file.rel
        @path = path
        @stat = File.lstat(path)
      end

      def stage(_text)
        now = File.lstat(@path)
        return if %i[dev ino size mtime].all? { |k| now.public_send(k) == @stat.public_send(k) }

        raise Refused, "#{rel} changed while loadscan uninstall ran: run it again"
      end

      # Moved aside (a name beside it) until `discard`, so that `restore` can put it back.
      def commit
        kept = File.join(File.dirname(@path), ".#{File.basename(@path)}.loadscan-old-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
        File.rename(@path, kept)
        @kept = kept
      rescue Errno::ENOENT
        nil
      end

      def restore
        File.rename(@kept, @path) if @kept
        @kept = nil
      end

      def discard
        File.unlink(@kept) if @kept
      rescue Errno::ENOENT
        nil
      ensure
        @kept = nil
      end
    end
  end
end
