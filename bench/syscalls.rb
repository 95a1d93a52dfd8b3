# frozen_string_literal: true
# Failed file-system calls per boot, BY CAUSE, for stock Ruby, Bootsnap 1.13 (where installed)
# and loadscan, warm and cold, on the Debian-packages tree and on the real-Bundler app, in one run:
#
#   ruby bench/syscalls.rb [--fixtures debian,gems-200] [--runs 2] [--no-cold]
#
# Method (bench/support/syscalls.rb has the details): each boot runs under
# `strace -f -qq -e trace=openat,open,stat,lstat,newfstatat,statx,access,faccessat,faccessat2`,
# every call kept, so the successful opens tell what had been loaded at each point. Each failed
# call gets one cause from its path and from what was opened before it, against the boot's
# $LOAD_PATH (a stock boot's report of the same fixture, in order):
#   own          the cache's own work: its cache dir, a load-path entry or an ancestor of one
#                (entry checks), an O_DIRECTORY open under an entry (listing). Stock: none. Cold
#                "apart from the listing" = total − own.
#   miss         <entry>/F.rb|.so where no entry has F.rb or F.so at all;
#   re-require   <entry>/F.rb|.so where F's winner (first entry with F.rb, else first with F.so,
#                Ruby's precedence) had already been opened: F is loaded and probed again;
#   left_to_ruby <entry>/F.rb|.so where F's winner was not loaded yet: a search up to the winner;
#   rubygems     RubyGems'/Bundler's own probes: under a GEM_PATH dir but no feature probe
#                (specifications/, gems/*/man, extensions/), *.gemspec, .bundle, Gemfile;
#   outside      everything else: a probe <entry>/F.rb|.so for a feature C code requires
#                (an extension's Init_ calling rb_require, Ruby's encoding loader: shown as
#                "F (from C)"; found from the C stacks of one `strace -k` boot per fixture, see
#                Bench::Syscalls.record_c_features), relative spellings (`enumerator.so`, checked
#                against $LOADED_FEATURES), Rails' own file checks, libc lookups.
# Ruby 3.1's `require` probes with openat only: a stat-family call on <entry>/F.rb|.so gets a
# cause by the same rule, but was made by other code (RubyGems' contains_requirable_file?,
# Rails); a failed stat of <entry>/D (no extension) is loadscan's check of the directory a sure
# miss would be in, counted as miss "D/".
# Every failed call before the prelude file is opened (stock loads the empty preludes/stock.rb
# at the same point) is counted as "before_prelude" (Ruby's startup, RubyGems, bundler/setup:
# nothing a cache set up in the prelude could answer), and broken down by the same causes.
# Path-based (plus the C-stack set), so it can be checked by hand in the kept logs
# (tmp/bench/strace/*.strace), and it does not depend on timing.
#
# The trees do not change during a run, so the counts are deterministic: every variant runs
# `--runs` times (default 2) and the output says whether the runs agreed.
# Variants: stock; bootsnap (warm: cache filled by an untraced boot; cold: empty cache dir);
# loadscan (the same). Ratios are of failed openat (and stat-family) calls.
require "optparse"
require "json"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "support/syscalls"
require_relative "boot"

opts = { fixtures: nil, runs: 2, cold: true, rails: false }
OptionParser.new do |o|
  o.banner = "usage: ruby bench/syscalls.rb [--fixtures debian,gems-200] [--gems N] [--debian] [--runs 2] [--no-cold]"
  o.on("--fixtures LIST", Array, "fixtures (default: debian when installed, gems-200)") { |v| opts[:fixtures] = v }
  o.on("--gems N", Integer, "only gems-N") { |n| opts[:fixtures] = ["gems-#{n}"] }
  o.on("--plain N", Integer, "only plain-N") { |n| opts[:fixtures] = ["plain-#{n}"] }
  o.on("--debian", "only the Debian tree") { opts[:fixtures] = ["debian"] }
  o.on("--runs N", Integer, "runs per variant, compared (default 2)") { |n| opts[:runs] = n }
  o.on("--[no-]cold", "also cold boots (default yes)") { |v| opts[:cold] = v }
  o.on("--rails", "also a generated Rails app (`rails new --minimal`, test/support/bundler_app.rb; Ruby 3.1): a `bin/rails runner` boot") { opts[:rails] = true }
end.parse!
abort "bench: strace not found (bin/setup installs it)" unless system("strace -V >/dev/null 2>&1")
opts[:fixtures] ||= (Bench::Fixtures.debian_available? ? ["debian"] : []) + ["gems-200"]

S = Bench::Syscalls

# The Rails app: made once by test/support/bundler_app.rb's rails_app (Debian's Rails, offline,
# Gemfile.lock from `bundle lock --local`), its config/boot.rb then reduced to what the bench's
# fixtures do: `require "bundler/setup"`, then the variant's BOOT_PRELUDE (stock: the empty one).
module RailsFixture
  module_function

  def ensure
    root = File.join(Bench::Fixtures::DIR, "rails")
    app = File.join(root, "railsapp")
    boot = File.join(app, "config", "boot.rb")
    unless File.exist?(boot) && File.read(boot).include?("BOOT_PRELUDE")
      warn "bench: generating the Rails app in #{root}"
      ts = Module.new
      ts.const_set(:ROOT, Bench::ROOT)
      ts.const_set(:LIB, File.join(Bench::ROOT, "lib"))
      Object.const_set(:Loadscan, Module.new) unless defined?(Loadscan)
      Loadscan.const_set(:TestSupport, ts) unless Loadscan.const_defined?(:TestSupport)
      require File.join(Bench::ROOT, "test", "support", "bundler_app")
      FileUtils.rm_rf(root)
      FileUtils.mkdir_p(root)
      Loadscan::TestSupport::BundlerApp.rails_app(root) or abort "bench: no rails executable for this Ruby"
      File.write(boot, <<~RUBY)
        ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../Gemfile", __dir__)
        require "bundler/setup"
        load ENV["BOOT_PRELUDE"] if ENV["BOOT_PRELUDE"] && !ENV["BOOT_PRELUDE"].empty?
      RUBY
    end
    env = { "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "BUNDLE_FROZEN" => "true", "RUBYOPT" => nil, "RUBYLIB" => nil,
            "BUNDLE_APP_CONFIG" => File.join(app, ".bundle"), "RAILS_ENV" => "development" }
    argv = [Bench::RUBY, "bin/rails", "runner", "nil"]
    fx = { name: "rails", root: app, chdir: app, env: env, argv: argv }
    lp = File.join(root, "load_path.marshal")
    system(env, *argv[0, 3], "File.binwrite(#{lp.inspect}, Marshal.dump($LOAD_PATH.map(&:to_s)))", chdir: app) or abort "bench: rails runner failed"
    S.set_load_path(fx, Marshal.load(File.binread(lp))) # rubocop:disable Security/MarshalLoad
    fx
  end

  def variants(fx, state)
    cache = File.join(Bench::Fixtures.cache_dir(fx), "x")
    %w[stock bootsnap loadscan].filter_map do |v|
      next if v == "stock" && state == "cold"

      dir = File.join(File.dirname(cache), "#{v}-#{state}")
      env = fx[:env].dup
      case v
      when "bootsnap" then env.merge!("BOOT_PRELUDE" => Bench::Fixtures.prelude("bootsnap"), "BENCH_BOOTSNAP_DIR" => dir)
      when "loadscan" then env.merge!("BOOT_PRELUDE" => Bench::Fixtures.prelude("loadscan"), "LOADSCAN_CACHE_DIR" => dir)
      end
      FileUtils.rm_rf(dir)
      FileUtils.mkdir_p(dir)
      prepare = state == "cold" && v != "stock" ? -> { FileUtils.rm_rf(dir); FileUtils.mkdir_p(dir) } : nil
      Bench::Variant.new(name: v, env: env, argv: fx[:argv], prepare: prepare)
    end
  end
end
ratio = ->(a, b) { b.zero? ? (a.zero? ? "0/0" : "∞") : format("%.2g", a.fdiv(b)) }
out = +""
json = {}
opts[:fixtures] += ["rails"] if opts[:rails]
opts[:fixtures].each do |name|
  fx = name == "rails" ? RailsFixture.ensure : Bench::Fixtures.ensure(name)
  S.load_path(fx)
  lv = (name == "rails" ? RailsFixture.variants(fx, "warm") : Bench::Boot.variants_for(fx, "warm")).find { |v| v.name == "loadscan" }
  system(lv.env, *lv.argv, out: File::NULL, err: File::NULL, chdir: fx.fetch(:chdir, Dir.pwd))
  cf = S.record_c_features(fx, lv)
  warn "bench: #{name}: features required from C (strace -k): #{cf.to_a.sort.join(" ")}"
  runs = []
  %w[warm cold].each do |state|
    next if state == "cold" && !opts[:cold]

    vs = if name == "rails"
           RailsFixture.variants(fx, state)
         else
           Bench::Boot.variants_for(fx, state).select { |v| %w[stock bootsnap loadscan].include?(v.name) }
             .reject { |v| v.name == "stock" && state == "cold" } # stock has no cache: its warm row stands
         end
    vs.each do |v|
      system(v.env, *v.argv, out: File::NULL, chdir: fx.fetch(:chdir, Dir.pwd)) if state == "warm" # fill the warm cache
      rs = Array.new(opts[:runs]) { |i| S.measure(fx, v, "#{state}-#{i}") }
      same = rs.map { |r| r[:counts] }.uniq.size == 1
      diff = S::CAUSES.select { |c| rs.map { |r| r[:counts][c] }.uniq.size > 1 }
      runs << { variant: v.name, state: state, result: rs.first, same: same, differ_in: diff,
                all: rs.map { |r| [r[:failed_openat], r[:failed_stat]] } }
      warn format("bench: %s %s %s: failed openat %s, stat %s", name, state, v.name,
                  rs.map { |r| r[:failed_openat] }.join("/"), rs.map { |r| r[:failed_stat] }.join("/"))
    end
  end
  rows = runs.map do |x|
    r = x[:result]
    [x[:variant], x[:state], "#{r[:before]["openat"]}/#{r[:before]["stat"]}"] + S::CAUSES.map { |c| "#{r[:counts][c]["openat"]}/#{r[:counts][c]["stat"]}" } +
      [r[:failed_openat].to_s, S.total(r, "openat", except: ["own"]).to_s, r[:failed_stat].to_s, S.total(r, "stat", except: ["own"]).to_s]
  end
  out << "#{fx[:name]}: failed calls of one boot by cause (failed openat/failed stat-family; strace -f)\n"
  out << Bench::Runner.table(%w[variant state before_prelude] + S::CAUSES + %w[openat openat−own stat stat−own], rows) << "\n"
  get = ->(v, s) { runs.find { |x| x[:variant] == v && x[:state] == s }&.dig(:result) }
  stock = get.("stock", "warm")
  %w[warm cold].each do |state|
    ls = get.("loadscan", state) or next
    bs = get.("bootsnap", state)
    %w[openat stat].each do |kind|
      l = S.total(ls, kind, except: ["own"])
      line = format("  %s loadscan, failed %s apart from own work: %d; /stock %s (target ≤ 0.001: %s)", state, kind, l,
                    ratio.(l, S.total(stock, kind)), l <= 0.001 * S.total(stock, kind) ? "met" : "NOT met")
      if bs
        b = S.total(bs, kind, except: ["own"])
        line << format("; /bootsnap %s (%d; target ≤ 1: %s)", ratio.(l, b), b, l <= b ? "met" : "NOT met")
      end
      out << line << "\n"
    end
  end
  same = runs.all? { |x| x[:same] }
  out << "  deterministic: #{same ? "yes, #{opts[:runs]} runs of each variant gave identical counts by cause" : "NO: " + runs.reject { |x| x[:same] }.map { |x| "#{x[:variant]} #{x[:state]} [openat, stat] per run #{x[:all].inspect}, differing in #{x[:differ_in].join(", ")}" }.join("; ")}\n" if opts[:runs] > 1
  runs.select { |x| x[:variant] != "stock" }.each do |x|
    %w[openat stat].each do |kind|
      b = S.breakdown(x[:result], kind: kind, top: 6)
      out << "  #{x[:variant]} #{x[:state]} #{kind}: #{b.empty? ? "none" : b.join("; ")}\n"
    end
  end
  %w[openat stat].each { |kind| out << "  stock #{kind}: #{S.breakdown(stock, kind: kind, top: 3).join("; ")}\n" }
  runs.each do |x|
    b = x[:result][:before_by_cause].filter_map { |c, v| "#{c} #{v["openat"]}/#{v["stat"]}" unless (v["openat"] + v["stat"]).zero? }
    out << "  #{x[:variant]} #{x[:state]}, before the prelude (openat/stat) by cause: #{b.join(", ")}\n"
  end
  out << "\n"
  json[name] = runs.map { |x| x.merge(result: x[:result]) }
end
puts out
puts "JSON: #{Bench::Runner.write_json("syscalls", { fixtures: json, table: out, at: Time.now.utc.to_s })}"
puts "strace logs: #{File.join(Bench::OUT_DIR, "strace")}"
