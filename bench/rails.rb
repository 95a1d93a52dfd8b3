# frozen_string_literal: true
# A real Rails app's boot: `rails new --minimal` (Debian's Rails 6.1, locked offline by the test
# suite's app maker) run as `bin/rails runner nil` in development, with stock Ruby, Bootsnap
# (load path and compile cache), loadscan, and loadscan beside Bootsnap's compile cache
# (`load_path_cache: false`, the README's "Coming from Bootsnap"). Every cache is warmed first;
# rounds alternate the four; the table gives CPU time (user+sys of the child) and wall time
# medians, and per-round CPU ratios against stock and Bootsnap, median [min–max].
#
#   ruby bench/rails.rb [ROUNDS]      (default 10; needs Debian's ruby-rails and ruby-bootsnap)
require "fileutils"
require "open3"

require_relative "../test/support/bundler_app"

App = Loadscan::TestSupport::BundlerApp
ROUNDS = Integer(ARGV[0] || 10)
work = File.join(__dir__, "..", "tmp", "bench-rails")
app = File.join(work, "railsapp")
unless File.directory?(app)
  FileUtils.mkdir_p(work)
  App.rails_app(work) or abort("bench/rails.rb: Debian's rails is not installed")
end
File.write(File.join(app, "config", "boot.rb"), <<~RUBY)
  require "bundler/setup"
  require "loadscan/setup" if ENV["BENCH_LOADSCAN"]
  if ENV["BENCH_BOOTSNAP"]
    require "bootsnap"
    Bootsnap.setup(cache_dir: ENV["BENCH_BOOTSNAP"], load_path_cache: ENV["BENCH_LOAD_PATH_CACHE"] == "1",
                   compile_cache_iseq: true, compile_cache_yaml: true)
  end
RUBY

caches = File.join(work, "caches")
FileUtils.rm_rf(caches)
FileUtils.mkdir_p(caches, mode: 0o700)
modes = {
  "stock" => {},
  "Bootsnap" => { "BENCH_BOOTSNAP" => "#{caches}/bootsnap", "BENCH_LOAD_PATH_CACHE" => "1" },
  "loadscan" => { "BENCH_LOADSCAN" => "1", "LOADSCAN_CACHE_DIR" => "#{caches}/loadscan" },
  "loadscan + Bootsnap compile cache" => { "BENCH_LOADSCAN" => "1", "LOADSCAN_CACHE_DIR" => "#{caches}/loadscan2",
                                           "BENCH_BOOTSNAP" => "#{caches}/compile" },
}

boot = lambda do |env|
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c0 = Process.times
  _, err, status = Open3.capture3(App.env(app).merge(env), App::RUBY, "bin/rails", "runner", "nil", chdir: app)
  abort("bin/rails runner failed:\n#{err}") unless status.success?
  c1 = Process.times
  [Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, c1.cutime - c0.cutime + c1.cstime - c0.cstime]
end

modes.each_value { |env| 2.times { boot.(env) } }
times = Hash.new { |h, k| h[k] = [] }
ROUNDS.times { modes.each { |name, env| times[name] << boot.(env) } }

median = ->(xs) { xs.sort[xs.size / 2] }
ratio = ->(name, base) { times[name].each_index.map { |i| times[name][i][1] / times[base][i][1] } }
rails = File.read(File.join(app, "Gemfile.lock"))[/^    railties \(([^)]+)\)/, 1]
puts "Rails #{rails} app (#{app}), #{ROUNDS} rounds"
puts format("%-36s %9s %9s  %-22s %-22s", "boot", "CPU s", "wall s", "CPU / stock", "CPU / Bootsnap")
times.each_key do |name|
  cells = %w[stock Bootsnap].map do |base|
    r = ratio.(name, base)
    format("%.2f [%.2f–%.2f]", median.(r), r.min, r.max)
  end
  puts format("%-36s %9.3f %9.3f  %-22s %-22s", name, median.(times[name].map(&:last)), median.(times[name].map(&:first)), *cells)
end
