# frozen_string_literal: true

module Loadscan
  class Installer
    # A file the installer adds (config/loadscan_boot.rb), written as AppFile replaces one: the
    # text into a new file beside it first (`stage`), renamed into place (`commit`). Its mode is
    # what the user's umask gives a new file, its owner the user running the installer.
    class NewFile
      attr_reader :rel

      def initialize(dir, rel)
        @rel = rel
        @path = File.join(dir, rel)
      end

      def stage(text)
        raise Refused, "#{rel} appeared while loadscan install ran: run it again" if File.exist?(@path) || File.symlink?(@path)

        tmp = File.join(File.dirname(@path), ".#{File.basename(@path)}.loadscan-install-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
        File.open(tmp, File::WRONLY | File::CREAT | File::EXCL | File::BINARY, 0o666) do |f|
          @staged = tmp
          f.write(text)
          f.fsync
        end
      end

      def commit
        File.rename(@staged, @path)
        @staged = nil
      end

      def discard
        File.unlink(@staged) if @staged
      rescue Errno::ENOENT
        nil
      ensure
        @staged = nil
      end
    end

    # A file `loadscan uninstall` removes (config/loadscan_boot.rb): checked unchanged since read
    # when staged, unlinked at commit.
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

      def commit
        File.unlink(@path)
      rescue Errno::ENOENT
        nil
      end

      def discard; end
    end
  end
end
