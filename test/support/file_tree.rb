# frozen_string_literal: true

module Loadscan
  module TestSupport
    # Real file trees in temp dirs, built inline:
    #
    #   with_files([["e1/foo.rb", "$log << :foo"], ["e2/foo.so", ""], ["e1/link", :symlink, "../e2"]]) do |dir|
    #     ...
    #   end
    #
    # An entry is [path, content] for a file, [path, :dir], [path, :symlink, target] or
    # [path, :fifo]. Paths are relative to the temp dir, which is realpath'd and removed after.
    module FileTree
      def with_files(entries)
        Dir.mktmpdir("loadscan-test") do |tmp|
          dir = File.realpath(tmp)
          make_tree(dir, entries)
          yield dir
        ensure
          FileUtils.chmod_R("u+rwx", tmp, force: true) if tmp && File.exist?(tmp)
        end
      end

      # Lets other users (a test run `as_nobody`) reach `dir` through its parent, the system's
      # temp dir: search permission is added for group and others if missing, nothing is taken
      # away (never `chmod 755 /tmp`, which drops its sticky bit and world write).
      def searchable_parent(dir)
        parent = File.dirname(dir)
        mode = File.stat(parent).mode & 0o7777
        File.chmod(mode | 0o011, parent) unless mode.allbits?(0o011)
      end

      # Dates the directories `globs` name (relative to `dir`, or absolute) `seconds` back, as after
      # a real pause between a tree's making and its listing: a directory changed within the racy
      # window of its listing (a second) counts as changed, and is asked of Ruby again; one dated
      # back is judged by its stamp. The one way the tests leave the racy window.
      def backdate(dir, globs = ["**/"], seconds: 3600)
        old = Time.now - seconds
        globs.flat_map { |g| Dir.glob(File.expand_path(g, dir)) }.each { |d| File.utime(old, old, d) }
      end

      def make_tree(dir, entries)
        entries.each do |path, kind, target|
          abspath = File.join(dir, path)
          FileUtils.mkdir_p(File.dirname(abspath))
          case kind
          when :dir then FileUtils.mkdir_p(abspath)
          when :symlink then File.symlink(target, abspath)
          when :fifo then system("mkfifo", abspath, exception: true)
          else File.write(abspath, kind.to_s)
          end
        end
      end
    end
  end
end
