# frozen_string_literal: true

# Runs the test files named as FILE or FILE:LINE (bin/test's short way in: `bin/test
# test/integration/cache_test.rb:53`). A LINE selects the test defined at or above it in FILE —
# a `def test_…`, or every test one `define_method` line makes — and a FILE alone all of its tests.
# Minitest's own options may follow `--` (`-v`, `--seed 42`).
require_relative "test_helper"

options = ARGV.index("--") ? ARGV.slice!(ARGV.index("--")..).drop(1) : []
abort "usage: ruby -Itest test/run.rb FILE[:LINE]... [-- MINITEST_OPTIONS]" if ARGV.empty?

targets = ARGV.map do |arg|
  file, line = arg.match(/\A(.+?)(?::(\d+))?\z/).captures
  path = File.expand_path(file)
  abort "bin/test: no such test file: #{file}" unless File.file?(path)
  require path
  [path, line&.to_i]
end

# Each test of the files loaded, with the file and line its definition starts at.
defined = Minitest::Runnable.runnables.flat_map do |klass|
  klass.methods_matching(/\Atest_/).map { |name| [name, *klass.instance_method(name).source_location] }
end
names = targets.flat_map do |path, line|
  mine = defined.select { |_, file, _| File.expand_path(file) == path }
  mine = mine.select { |_, _, at| at == mine.map(&:last).select { |l| l <= line }.max } if line
  abort "bin/test: no test is defined at or above #{path}:#{line}" if mine.empty?
  mine.map(&:first)
end
ARGV.replace(["-n", "/\\A(#{names.map { |n| Regexp.escape(n) }.join("|")})\\z/", *options])
