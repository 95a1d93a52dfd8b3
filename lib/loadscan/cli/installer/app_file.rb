# frozen_string_literal: true

module Loadscan
  class Installer
    # One file of the app the installer may edit, read through its symlinks, and replaced in two
    # steps: `stage` writes the new text to a new file beside the target (the file a symlink
    # points to) with the target's mode, owner and extended attributes (its ACL), `commit`
    # renames it over the target (a reader sees the old file or the new one, and a symlink still
    # points to it) keeping the old file until `discard` (`restore` puts it back), `discard`
    # removes a staged file that was not committed and the old file kept. A file it could not replace keeping everything a user
    # relies on (more than one hard link, an owner it cannot give the new file) is refused.
    class AppFile
      attr_reader :rel, :text, :eol

      # The app's file `rel` in `dir`, or nil when there is none.
      def self.read(dir, rel)
        path = File.join(dir, rel)
        File.lstat(path)
        new(rel, path)
      rescue Errno::ENOENT, Errno::ENOTDIR
        nil
      end

      def initialize(rel, path)
        @rel = rel
        @target = target_of(path)
        File.open(@target, File::RDONLY | File::NONBLOCK | File::BINARY) do |f| # a fifo: no wait for a writer
          @stat = f.stat
          refuse_kind(@stat)
          @text = f.read.force_encoding(Encoding::UTF_8)
        end
        raise Refused, "#{rel} is not UTF-8 text: loadscan install does not edit it; #{BY_HAND}" unless @text.valid_encoding?

        # New lines end as the file's first line does (CRLF files stay CRLF).
        @eol = @text[/\r?\n/] || "\n"
      end

      # Writes `text` into a new file beside the target, with the target's mode and owner.
      def stage(text)
        unchanged_since_read
        tmp = File.join(File.dirname(@target), ".#{File.basename(@target)}.loadscan-install-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
        File.open(tmp, File::WRONLY | File::CREAT | File::EXCL | File::BINARY, 0o600) do |f|
          @staged = tmp
          f.write(text)
          keep_owner(f)
          keep_xattrs(tmp) # its ACL too: after chown (an ACL names users), before chmod (which sets the ACL's mask)
          f.chmod(@stat.mode & 0o7777) # after chown, which clears setuid and setgid bits
          f.fsync
        end
      rescue SystemCallError => e
        raise e.class, "replacing #{@target} (by a new file beside it: #{File.basename(tmp)})", cause: nil if e.message.include?(tmp)

        raise
      end

      # Puts the staged file in the target's place, the old file kept under a name beside it
      # (a hard link) until `discard`, so that `restore` can put it back.
      def commit
        @kept = File.join(File.dirname(@target), ".#{File.basename(@target)}.loadscan-old-#{Process.pid}-#{rand(1 << 32).to_s(16)}")
        begin
          File.link(@target, @kept)
        rescue SystemCallError
          @kept = nil # no hard links here: the old text is staged instead, its mode, owner and attributes as the new one's
          @kept = stage_copy(@text)
        end
        begin
          File.rename(@staged, @target)
        rescue SystemCallError => e
          raise e.class, "replacing #{@target}", cause: nil
        end
        @staged = nil
      end

      # The old file back in place (after `commit`, when a later file could not be replaced).
      def restore
        File.rename(@kept, @target) if @kept
        @kept = nil
      rescue SystemCallError => e
        kept = @kept
        @kept = nil # left for the user: `discard` does not remove it
        raise e, "#{rel} could not be put back (#{e.message}): its old text is in #{kept}"
      end

      # Removes what `stage` and `commit` left beside the target (a staged file never
      # committed, the old file kept).
      def discard
        [@staged, @kept].compact.each do |path|
          File.unlink(path)
        rescue Errno::ENOENT
          nil
        end
      ensure
        @staged = @kept = nil
      end

      private

      def target_of(path)
        File.lstat(path).symlink? ? File.realpath(path) : path
      rescue Errno::ENOENT, Errno::ELOOP
        raise Refused, "#{rel} is a symlink to #{File.readlink(path)}, which does not resolve: fix the link first"
      end

      def refuse_kind(stat)
        raise Refused, "#{rel} is not a regular file (#{stat.ftype}): loadscan install does not edit it" unless stat.file?
        return unless stat.nlink > 1

        raise Refused, "#{rel} has #{stat.nlink} hard links: loadscan install replaces the file, which would leave the " \
                       "other links with the old text; #{BY_HAND}"
      end

      def keep_owner(file)
        own = file.stat
        file.chown(@stat.uid, @stat.gid) unless own.uid == @stat.uid && own.gid == @stat.gid
      rescue Errno::EPERM
        raise Refused, "#{rel} belongs to uid #{@stat.uid} gid #{@stat.gid}: replaced by uid #{Process.euid} it would change " \
                       "owner; run `loadscan install` as its owner (or root)"
      end

      def stage_copy(text)
        staged = @staged
        stage(text)
        @staged
      ensure
        @staged = staged
      end

      # The target's extended attributes (ACLs among them) given to the new file, by the
      # extension (Ruby has no call for them); without it they are not looked at.
      def keep_xattrs(tmp)
        return unless defined?(Native) && Native.respond_to?(:copy_xattrs)

        why = Native.copy_xattrs(@target, tmp) or return
        raise Refused, "#{rel}: #{why}: replaced by a new file it would lose it; #{BY_HAND}"
      end

      def unchanged_since_read
        now = File.stat(@target)
        return if %i[dev ino size mtime].all? { |k| now.public_send(k) == @stat.public_send(k) }

        raise Refused, "#{rel} changed while loadscan install ran: run it again"
      end
    end
  end
end
