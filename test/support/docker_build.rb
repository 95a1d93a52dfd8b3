# frozen_string_literal: true

require "fileutils"
require "rbconfig"

module Loadscan
  module TestSupport
    # A Dockerfile's build without a Docker daemon, for the Dockerfile Rails generates: its
    # stages' ENV settings and RUN commands as written, run by `sh -c` in the app's directory, with
    # what the image would hold put in place by hand: the app's files as `COPY . .` takes them
    # (Rails' .dockerignore: no .bundle/, nor tmp/, log/ or storage/ contents), and the gems installed under
    # BUNDLE_PATH (hard links to the gems installed here: `bundle install` needs the network),
    # as the official Ruby image sets them up (GEM_HOME and BUNDLE_APP_CONFIG there).
    module DockerBuild
      # One stage: its parent (a stage or nil), its ENV settings and its instructions, as
      # `[keyword, arguments]` with continuation lines joined and comments dropped.
      Stage = Struct.new(:parent, :env, :steps) do
        def all_env = (parent ? parent.all_env : {}).merge(env)
      end

      module_function

      # `{name => Stage}`, the last stage also as :final.
      def stages(text)
        stages = {}
        current = nil
        instructions(text).each do |keyword, args|
          if keyword == "FROM"
            image, name = args.split(/\s+AS\s+/i)
            current = Stage.new(stages[image], {}, [])
            stages[name || :final] = current
            stages[:final] = current
          elsif keyword == "ENV"
            args.scan(/(\w+)=(?:"([^"]*)"|(\S*))/) { |key, quoted, bare| current.env[key] = quoted || bare }
          end
          current&.steps&.push([keyword, args])
        end
        stages
      end

      def instructions(text)
        text.gsub(/\\\n(?:[ \t]*#[^\n]*\n)*/, " ").lines.map(&:strip).reject { |l| l.empty? || l.start_with?("#") }
            .map { |l| l.split(/\s+/, 2) }.map { |k, a| [k.upcase, a.to_s] }
      end

      # The RUN commands of `stage` after its `COPY . .`: the steps that work on the app's code.
      def app_steps(stage)
        copied = stage.steps.index(["COPY", ". ."]) or raise "no `COPY . .` in the stage"
        stage.steps.drop(copied + 1).filter_map { |keyword, args| args if keyword == "RUN" }
      end

      # Copies `app` into `dir` as `COPY . .` does with Rails' .dockerignore.
      def copy_app(app, dir)
        FileUtils.cp_r(app, dir, preserve: true)
        FileUtils.rm_rf(File.join(dir, ".bundle"))
        %w[tmp log storage].each do |sub|
          Dir.glob("*", File::FNM_DOTMATCH, base: File.join(dir, sub)).each do |name|
            FileUtils.rm_rf(File.join(dir, sub, name)) unless %w[. .. .keep pids storage].include?(name)
          end
        end
      end

      # The gem dirs `homes` (GEM_HOMEs, Ruby's own gem dir among them) hard-linked into
      # `bundle`/ruby/<ABI>, as `bundle install` with BUNDLE_PATH=`bundle` lays them out; only
      # directories are new (readable by all), no file is changed, but for the executables'
      # wrappers `bundle install` writes and a home lacks (Debian's unpacked gems have none:
      # Bootsnap's `bootsnap`, the Dockerfile's precompile step). Returns that dir.
      def install_gems(bundle, homes)
        dir = File.join(bundle, "ruby", RbConfig::CONFIG["ruby_version"])
        homes.each do |home|
          %w[gems extensions bin].each do |sub|
            next unless File.directory?(File.join(home, sub))

            FileUtils.mkdir_p(File.join(dir, sub))
            system("cp", "-al", "#{File.join(home, sub)}/.", File.join(dir, sub), exception: true)
          end
          FileUtils.mkdir_p(File.join(dir, "specifications"))
          Dir[File.join(home, "specifications", "*.gemspec")].each { |spec| FileUtils.ln(spec, File.join(dir, "specifications"), force: true) }
        end
        write_wrappers(dir)
        system("find", bundle, "-type", "d", "-exec", "chmod", "755", "{}", "+", exception: true)
        dir
      end

      # In `dir`/bin, a wrapper as RubyGems writes it for each executable of the gems in `dir`
      # that has none.
      def write_wrappers(dir)
        Dir[File.join(dir, "specifications", "*.gemspec")].each do |path|
          spec = Gem::Specification.load(path) or next
          spec.executables.each do |exe|
            wrapper = File.join(dir, "bin", exe)
            next if File.exist?(wrapper)

            FileUtils.mkdir_p(File.dirname(wrapper))
            File.write(wrapper, <<~RUBY)
              #!#{RbConfig.ruby}
              require "rubygems"
              load Gem.activate_bin_path(#{spec.name.inspect}, #{exe.inspect}, ">= 0.a")
            RUBY
            File.chmod(0o755, wrapper)
          end
        end
      end

      # The final stage's `COPY --from=build`: the same paths, new files (new inodes; mtimes
      # kept); `owner` then owns the app's, as `--chown` does (the gems, hard links to files
      # installed here, keep theirs).
      def copy_from_build(app, bundle, owner)
        fresh = "#{app}.copy"
        FileUtils.cp_r(app, fresh, preserve: true)
        FileUtils.rm_rf(app)
        File.rename(fresh, app)
        system("cp", "-al", bundle, "#{bundle}.copy", exception: true)
        FileUtils.rm_rf(bundle)
        File.rename("#{bundle}.copy", bundle)
        FileUtils.chown_R(owner, owner == "nobody" ? "nogroup" : owner, app)
      end

      # The environment of the official Ruby image with `env` (a stage's ENV) and BUNDLE_PATH
      # moved to `bundle`; everything else of the test's environment that Ruby, RubyGems,
      # Bundler, Rails, Bootsnap or loadscan read unset.
      def image_env(env, bundle, home)
        cleared = ENV.keys.grep(/\A(GEM_|BUNDLE_|RUBY|LOADSCAN_|BOOTSNAP|DISABLE_BOOTSNAP|RAILS_|RACK_|DATABASE_URL)/).to_h { |k| [k, nil] }
        cleared["LOADSCAN_CACHE_DIR"] = nil # RubyProcess.run_ruby's own
        env = env.merge("BUNDLE_PATH" => bundle)
        env.delete("LD_PRELOAD") unless File.exist?(env["LD_PRELOAD"].to_s) # jemalloc, installed by apt in the image
        cleared.merge(env).merge("GEM_HOME" => bundle, "BUNDLE_APP_CONFIG" => bundle, "BUNDLE_SILENCE_ROOT_WARNING" => "1",
                                 "HOME" => home, "PATH" => "#{bundle}/bin:#{RbConfig::CONFIG["bindir"]}:/usr/local/bin:/usr/bin:/bin")
      end
    end
  end
end
