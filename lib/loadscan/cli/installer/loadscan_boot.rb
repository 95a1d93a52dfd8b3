# frozen_string_literal: true

# loadscan, set up before Bundler. Written by `loadscan install` (`loadscan uninstall` removes
# it); config/boot.rb loads it before `require "bundler/setup"`, so that Bundler's own files and
# everything after them load through loadscan. It finds the loadscan that Gemfile.lock names,
# that exact version, without loading Bundler or activating a gem: in Bundler's path
# (BUNDLE_PATH, .bundle/config: vendor/bundle), else on Gem.path, or a `path:` or `git:` gem's
# directory; and requires that copy's lib/loadscan/setup.rb by its absolute path ($LOAD_PATH
# stays as it is). Where it cannot (no lockfile, loadscan not in it, that version not installed
# for this Ruby, Bundler set up already by `bundle exec`), it does nothing: config/boot.rb's
# `require "loadscan/setup"` after Bundler's sets loadscan up then, as without this file.
return if defined?(::Bundler) || defined?(::Loadscan) || !defined?(::Gem) || !defined?(::RbConfig)

env = ENV
# Another lockfile than the Gemfile's (Bundler 4 only): left to Bundler.
return unless env["BUNDLE_LOCKFILE"].to_s.empty?

# The Gemfile as Bundler finds it: BUNDLE_GEMFILE, else gems.rb or Gemfile from here upward.
gemfile = env["BUNDLE_GEMFILE"].to_s
if gemfile.empty?
  dir = File.expand_path(Dir.pwd)
  loop do
    gemfile = %w[gems.rb Gemfile].map { |name| File.join(dir, name) }.find { |path| File.file?(path) }
    break if gemfile || File.dirname(dir) == dir

    dir = File.dirname(dir)
  end
  return unless gemfile
end
gemfile = File.expand_path(gemfile)
root = File.dirname(gemfile)
lockfile = File.basename(gemfile) == "gems.rb" ? gemfile.sub(/\.rb\z/, ".locked") : "#{gemfile}.lock"
lock = begin
  File.binread(lockfile)
rescue SystemCallError
  return
end

# loadscan's source in the lockfile: the section (GEM, PATH, GIT) whose specs name it.
at = lock.index("\n    loadscan (") or return
head = lock.rindex(/^[^\s]/, at) or return
tail = lock.index(/^[^\s]/, at + 1) || lock.size
section = lock[head...tail].delete("\r")
kind = section[/\A\S+/]
locked = section.scan(/^ {4}loadscan \(([^()\s]+)\)$/).flatten

# Bundler's settings that say where gems are (first level that sets any of them wins: the app's
# .bundle/config, the environment, the user's), read as Bundler reads them.
read_config = lambda do |path|
  File.binread(path).scan(/^(BUNDLE_[A-Z0-9_]+):[ \t]*(?:"(.*)"|'(.*)'|(.*?))[ \t]*\r?$/).to_h do |key, *values|
    [key, values.compact.first.gsub(/\\(["\\])/, '\1')]
  end
rescue SystemCallError
  {}
end
ignore = env["BUNDLE_IGNORE_CONFIG"].to_s != ""
app_config = env["BUNDLE_APP_CONFIG"].to_s
local = ignore ? {} : read_config.call(File.join(app_config.empty? ? File.join(root, ".bundle") : File.expand_path(app_config, root), "config"))
global_file = %w[BUNDLE_CONFIG BUNDLE_USER_CONFIG].map { |name| env[name].to_s }.find { |value| !value.empty? }
global_file ||= env["BUNDLE_USER_HOME"].to_s.empty? ? File.join(Gem.user_home.to_s, ".bundle", "config") : File.join(env["BUNDLE_USER_HOME"], "config")
global = ignore ? {} : read_config.call(global_file)
levels = [local, env, global]
truthy = ->(value) { !value.nil? && !value.to_s.match?(/\A(false|f|no|n|0|)\z/i) }
path = system = nil
set = levels.find { |level| %w[BUNDLE_PATH BUNDLE_PATH__SYSTEM BUNDLE_DISABLE_SHARED_GEMS].any? { |key| level[key] } }
if set
  path = set["BUNDLE_PATH"]
  system = truthy.call(set["BUNDLE_PATH__SYSTEM"]) || (!set["BUNDLE_DISABLE_SHARED_GEMS"].nil? && !truthy.call(set["BUNDLE_DISABLE_SHARED_GEMS"]))
elsif levels.any? { |level| truthy.call(level["BUNDLE_DEPLOYMENT"]) }
  path = "vendor/bundle"
end
system ||= path.nil?
bundle_path = system ? Gem.dir : File.expand_path(File.join(path, RUBY_ENGINE, RbConfig::CONFIG["ruby_version"]), root)

lib = case kind
      when "PATH"
        remote = section[/^  remote: (.+)$/, 1] or return
        File.join(File.expand_path(remote, root), "lib")
      when "GIT"
        remote = section[/^  remote: (.+)$/, 1]
        revision = section[/^  revision: (\h+)$/, 1]
        return unless remote && revision && !section.match?(/^  glob: /)

        base = File.basename(remote.sub(%r{^(\w+://)?([^/:]+:)?(//\w*/)?(\w*/)*}, ""), ".git")
        File.join(bundle_path, "bundler", "gems", "#{base}-#{revision[0, 12]}", "lib")
      when "GEM"
        # The variants this platform can use, as Bundler prefers them: a platform's own, then ruby.
        local_platform = Gem::Platform.local
        variants = locked.select do |full|
          platform = full.split("-", 2)[1]
          platform && Gem::Platform.new(platform) === local_platform
        end
        variants += locked.reject { |full| full.include?("-") }
        full = variants.first or return
        dir = (system ? Gem.path : [bundle_path]).find do |gem_dir|
          File.file?(File.join(gem_dir, "specifications", "loadscan-#{full}.gemspec"))
        end
        return unless dir

        File.join(dir, "gems", "loadscan-#{full}", "lib")
      end
return unless lib

setup = File.join(lib, "loadscan", "setup.rb")
require setup if File.file?(setup)
