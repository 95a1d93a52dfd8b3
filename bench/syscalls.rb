# frozen_string_literal: true
# Failed file-system calls per boot, BY CAUSE, for stock Ruby, Bootsnap and loadscan, warm and
# cold, on the real-Bundler app (gems-N), the Debian-packages tree (Debian's Ruby 3.1 only: its
# packages are that Ruby's) and, with --rails, the Rails 7.2.4 app, in one run:
#
#   ruby bench/syscalls.rb [--fixtures debian,gems-200] [--rails] [--runs 2] [--no-cold]
#
# Run with Ruby 3.3.8 (PATH=/opt/rubies/ruby-3.3.8/bin:$PATH), it measures against Bootsnap 1.26.1
# (Debian sid's, from that Ruby's Rails stack: bin/setup-rails-gems), which the fixtures' Gemfiles
# lock; with Debian's Ruby 3.1, against Debian's ruby-bootsnap 1.13 (the older stack; no Rails
# there). Ruby 3.4's stack has no Bootsnap: stock and loadscan only.
# Each fixture's block names the Ruby and Bootsnap it measured.
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
# A stat-family call on <entry>/F.rb|.so gets a cause by the same rule, but was made by other
# code than `require`, which probes with openat (RubyGems' contains_requirable_file?, Rails); a
# failed stat of <entry>/D (no extension) is loadscan's check of the directory a sure miss would
# be in, counted as miss "D/".
# Every failed call before the prelude file is opened (stock loads the empty preludes/stock.rb
# at the same point) is counted as "before_prelude" (Ruby's startup, RubyGems, bundler/setup:
# nothing a cache set up in the prelude could answer), and broken down by the same causes.
# Path-based (plus the C-stack set), so it can be checked by hand in the kept logs
# (tmp/bench/strace/*.strace), and it does not depend on timing.
#
# The trees do not change during a run, so the counts are deterministic: every variant runs
# `--runs` times (default 2) and the output says whether the runs agreed.
# Variants: stock; bootsnap (its load-path cache, bench/preludes/bootsnap.rb; in the Rails app,
# Bootsnap as generated); loadscan (in the Rails app, with Bootsnap's compile cache), each warm
# (cache filled by an untraced boot) and cold (empty cache dir). Ratios are of failed openat (and
# stat-family) calls.
require "json"
require_relative "support/runner"
require_relative "support/fixtures"
require_relative "support/syscalls"
require_relative "support/rails_app"
require_relative "support/boot"

banner = "usage: ruby bench/syscalls.rb [--fixtures debian,gems-200] [--gems N] [--debian] [--rails] [--runs 2] [--no-cold]"
opts = Bench::Runner.parse(banner, { fixtures: nil, runs: 2, cold: true, rails: false }) do |o, op|
  o.on("--fixtures LIST", Array, "fixtures (default: gems-200, and debian first on Debian's Ruby with its packages installed)") do |v|
    op[:fixtures] = v
  end
  o.on("--gems N", Integer, "only gems-N") { |n| op[:fixtures] = ["gems-#{n}"] }
  o.on("--plain N", Integer, "only plain-N") { |n| op[:fixtures] = ["plain-#{n}"] }
  o.on("--debian", "only the Debian tree") { op[:fixtures] = ["debian"] }
  o.on("--runs N", Integer, "runs per variant, compared (default 2)") { |n| op[:runs] = n }
  o.on("--[no-]cold", "also cold boots (default yes)") { |v| op[:cold] = v }
  o.on("--rails", "also the Rails 7.2.4 app (bench/support/rails_app.rb; Ruby 3.2+): a `bin/rails runner nil` boot") { op[:rails] = true }
end
abort "bench: strace not found (bin/setup installs it)" unless system("strace -V >/dev/null 2>&1")
if opts[:rails] && (reason = Bench::RailsApp.missing)
  abort "bench/syscalls.rb --rails: #{reason}"
end
# The Debian-packages tree is Debian's Ruby 3.1's packages (Rails 6.1, extensions built for it):
# another Ruby cannot boot it.
debian = Bench::Fixtures.debian_bootable?
opts[:fixtures] ||= (debian ? ["debian"] : []) + ["gems-200"]

S = Bench::Syscalls

# The Rails 7.2.4 app of bench/rails.rb and the gate (Bench::RailsApp: `rails new` with Debian sid's
# stack, its own Gemfile.lock, booted through its real Bundler by `bin/rails runner nil`, in
# development), three ways: stock, Bootsnap as the generator wires it (load-path cache and compile
# cache) and loadscan + Bootsnap's compile cache (the lines `loadscan install` writes; GC deferred
# during the boot, as loadscan comes). Each variant and state has cache dirs of its own
# (BOOTSNAP_CACHE_DIR, loadscan's inside it: "own"). The app's config/boot.rb loads BOOT_PRELUDE
# right after `require "bundler/setup"`, before loadscan's and Bootsnap's lines: Syscalls.measure
# sets it to the empty stock prelude, so "before_prelude" is the same point in every boot.
module RailsFixture
  BOOTS = %w[stock bootsnap loadscan+compile_cache].freeze
  module_function

  def ensure
    dir = Bench::RailsApp.ensure
    fx = { name: "rails72", root: dir, chdir: dir }
    stock = Bench::RailsApp.variants(only: ["stock"]).first
    S.set_load_path(fx, Bench::RailsApp.report(stock, "syscalls-load-path")[:load_path])
    fx
  end

  def variants(fx, state)
    Bench::RailsApp.variants(only: BOOTS).filter_map do |v|
      next if v.name == "stock" && state == "cold"

      dir = File.join(Bench::Fixtures.cache_dir(fx), "#{v.name}-#{state}")
      reset = lambda do
        FileUtils.rm_rf(dir)
        FileUtils.mkdir_p(dir, mode: 0o700)
      end
      reset.call
      env = v.env.merge("BOOTSNAP_CACHE_DIR" => dir, "LOADSCAN_CACHE_DIR" => File.join(dir, "loadscan"))
      Bench::Variant.new(name: v.name, env: env, argv: v.argv, chdir: v.chdir, prepare: state == "cold" ? reset : nil)
    end
  end

  def stack(fx) = Bench::Fixtures.stack(Bench::RailsApp.variants(only: ["stock"]).first.env, chdir: fx[:chdir])
end
ratio = ->(a, b) { b.zero? ? (a.zero? ? "0/0" : "∞") : format("%.2g", a.fdiv(b)) }
out = +""
json = {}
opts[:fixtures] += ["rails"] if opts[:rails]
opts[:fixtures].each do |name|
  rails = name == "rails"
  fx = rails ? RailsFixture.ensure : Bench::Fixtures.ensure(name)
  stack = rails ? RailsFixture.stack(fx) : Bench::Fixtures.stack(Bench::Fixtures.gem_env(fx))
  warn "bench: #{name}: #{stack[:line]}"
  S.load_path(fx)
  loadscan = rails ? "loadscan+compile_cache" : "loadscan"
  lv = (rails ? RailsFixture.variants(fx, "warm") : Bench::Boot.variants_for(fx, "warm")).find { |v| v.name == loadscan }
  system(lv.env, *lv.argv, out: File::NULL, err: File::NULL, chdir: fx.fetch(:chdir, Dir.pwd))
  cf = S.record_c_features(fx, lv)
  warn "bench: #{name}: features required from C (strace -k): #{cf.to_a.sort.join(" ")}"
  runs = []
  %w[warm cold].each do |state|
    next if state == "cold" && !opts[:cold]

    vs = if rails
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
  out << "#{fx[:name]}: failed calls of one boot by cause (failed openat/failed stat-family; strace -f); " \
         "#{stack[:line]}#{", Rails #{Fixtures::RailsApp::RAILS}, `bin/rails runner nil` in development" if rails}\n"
  if rails
    out << "  (bootsnap: Bootsnap as `rails new` wires it, load-path and compile cache; loadscan+compile_cache: " \
           "the lines `loadscan install` writes, Bootsnap's load-path cache off)\n"
  end
  out << Bench::Runner.table(%w[variant state before_prelude] + S::CAUSES + %w[openat openat−own stat stat−own], rows) << "\n"
  get = ->(v, s) { runs.find { |x| x[:variant] == v && x[:state] == s }&.dig(:result) }
  stock = get.("stock", "warm")
  %w[warm cold].each do |state|
    ls = get.(loadscan, state) or next
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
  json[name] = { stack: stack, runs: runs }
end
Bench::Runner.publish("syscalls", out, { fixtures: json, table: out, at: Time.now.utc.to_s })
puts "strace logs: #{File.join(Bench::OUT_DIR, "strace")}"
