# frozen_string_literal: true

require_relative "ruby_process"
require_relative "paths"

module Loadscan
  module TestSupport
    # `loadscan install` as a user runs it: exe/loadscan of this checkout in a real process, in
    # the app's directory.
    module InstallerRun
      EXE = File.join(ROOT, "exe", "loadscan")
      FILES = %w[Gemfile config/boot.rb Dockerfile].freeze

      # [stdout, stderr, exit status] (`ruby_opts`: options of the Ruby running it, `-r` a file).
      def install(dir, *args, env: {}, as_nobody: false, ruby_opts: [])
        run = RubyProcess.run_ruby(file: EXE, args: [*args, "install"], env: { "BUNDLE_GEMFILE" => nil }.merge(env), chdir: dir,
                                   as_nobody: as_nobody, ruby_opts: ruby_opts)
        [run.stdout, run.stderr, run.status.exitstatus]
      end

      # `loadscan uninstall` as `install` runs it: [stdout, stderr, exit status].
      def uninstall(dir, *args, env: {})
        run = RubyProcess.run_ruby(file: EXE, args: [*args, "uninstall"], env: { "BUNDLE_GEMFILE" => nil }.merge(env), chdir: dir)
        [run.stdout, run.stderr, run.status.exitstatus]
      end

      # The files install may edit, by name: their bytes, or nil.
      def files(dir)
        FILES.to_h { |f| [f, File.file?(File.join(dir, f)) ? File.binread(File.join(dir, f)).force_encoding(Encoding::UTF_8) : nil] }
             .compact
      end
    end
  end
end
