# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/profile_app"
require "json"

# The boot profile (README, "Boot profile") on a Bundler app whose config/boot.rb sets loadscan
# up, with a gem whose top level sleeps 50 ms and allocates 100,000 objects (slowgem) and the gem
# it requires (fastgem): through `loadscan profile`, LOADSCAN_PROFILE and `Loadscan.profile`.
class ProfileTest < Minitest::Test
  include Loadscan::TestSupport::ProfileApp

  def test_loadscan_profile_prints_writes_speedscope_and_a_page_chromium_shows
    with_files([]) do |dir|
      app = profile_app(dir)
      FileUtils.mkdir_p(File.join(dir, "out"))
      run = run_ruby(file: Loadscan::TestSupport::EXE, args: ["--json", "profile", "--output", File.join(dir, "out", "boot")], chdir: app, env: app_env(app))
      assert run.success?, run.stderr
      summary = JSON.parse(run.stdout)
      assert_equal [RbConfig.ruby, "-e"], summary["command"].split(" ", 3).first(2), "the boot doctor runs: config/boot.rb, Bundler.require"
      assert_slowgem_first(summary["features"], app)

      data = JSON.parse(File.read(summary["json"]))
      entries = profile_entries(data)
      slow = entries.find { |e| e["label"] == "slowgem" }
      assert_slowgem(slow, app)
      fast = entries.find { |e| e["label"] == "fastgem" }
      assert_equal slow["id"], fast["parent"], "fastgem, required by slowgem, is under it"
      assert_equal "fastgem", fast["gem"]
      assert_equal File.join(app, "gems/fastgem/lib/fastgem.rb"), fast["file"]
      assert_in_delta data["profiles"][0]["endValue"] / 1000.0, entries.sum { |e| e["self_wall"] }, 0.001 # (each to the µs)
      assert_equal %w[$schema activeProfileIndex exporter loadscan name profiles shared], data.keys.sort
      assert_equal %w[allocated cpu gc gem kind name version], data["loadscan"].keys.sort - ["samples"], "loadscan's figures, not its entries again"
      assert_kind_of Integer, data["loadscan"]["samples"] if RUBY_VERSION >= "3.3" # (stack samples: Ruby 3.3 and later)
      assert entries.any? { |e| e["label"] == "loadscan/setup" && e["gem"] == "loadscan" }, "loadscan's own setup is an entry"

      problems = speedscope_problems(summary["json"])
      skip "no speedscope schema or jsonschema here (bin/setup installs them)" if problems == :no_checker
      assert_nil problems

      html = File.read(summary["html"])
      refute_match(/<(?:script|link|img)[^>]+(?:src|href)=/, html, "nothing fetched: everything inline")
      dom = chromium_dom(summary["html"]) or skip "no Chromium here (bin/setup installs it)"
      top = entries.select { |e| %w[require require_relative load].include?(e["kind"]) }.max_by { |e| own(e) }
      assert_equal summary["features"].first["label"], top["label"]
      assert_equal [top["label"], top["gem"], page_ms(own(top))], first_entry(dom), "the page's first file is the profile's"
      assert_includes dom, "search by gem"
    end
  end

  # `bundle exec loadscan profile` profiles the boot `loadscan profile` does: the app's, in the
  # environment from before Bundler's setup, where config/boot.rb sets Bundler up (inheriting
  # `bundle exec`'s BUNDLER_SETUP, the boot had it set up in Ruby's start, before the profile).
  def test_loadscan_profile_under_bundle_exec_profiles_the_boots_bundler_setup
    with_files([]) do |dir|
      app = profile_app(dir)
      bundle = File.join(RbConfig::CONFIG["bindir"], "bundle")
      features = [[RbConfig.ruby], [bundle, "exec", RbConfig.ruby]].map do |cmd|
        run = run_ruby(command: [*cmd, Loadscan::TestSupport::EXE, "--json", "profile", "--output", File.join(dir, "boot")],
                       chdir: app, env: app_env(app))
        assert run.success?, run.stderr
        entries = profile_entries(JSON.parse(File.read(JSON.parse(run.stdout)["json"])))
        setup = entries.find { |e| e["label"] == "bundler/setup" }
        assert_equal "config/boot.rb", setup && entries[setup["parent"]]["label"], "#{cmd.join(" ")}: bundler/setup under config/boot.rb"
        entries.select { |e| %w[require require_relative load].include?(e["kind"]) && e["label"].start_with?("bundler") }.map { |e| e["label"] }.sort
      end
      assert_equal features[0], features[1], "Bundler's files, plain and under bundle exec"
    end
  end

  # A command given after `--` runs as it was asked: under `bundle exec`, in bundle exec's
  # environment (only the default boot gets the app's, from before Bundler's setup).
  def test_a_command_given_under_bundle_exec_keeps_bundle_execs_environment
    with_files([]) do |dir|
      app = profile_app(dir)
      seen = File.join(dir, "seen")
      bundle = File.join(RbConfig::CONFIG["bindir"], "bundle")
      script = 'File.write(ARGV[0], [ENV["BUNDLE_GEMFILE"].to_s, ENV["RUBYOPT"].to_s, defined?(Bundler).to_s].join("\n"))'
      run = run_ruby(command: [bundle, "exec", RbConfig.ruby, Loadscan::TestSupport::EXE, "profile", "--output", File.join(dir, "boot"),
                               "--", RbConfig.ruby, "-e", script, seen], chdir: app, env: app_env(app))
      assert run.success?, run.stderr
      gemfile, rubyopt, bundler = File.read(seen).split("\n", -1)
      assert_equal File.join(app, "Gemfile"), File.realpath(gemfile), "BUNDLE_GEMFILE"
      assert_includes rubyopt, "bundler/setup", "bundle exec's RUBYOPT"
      assert_equal "constant", bundler, "Bundler set up in the command, as bundle exec sets it up"
    end
  end

  # A profiled boot warns as stock does: Ruby's bundled_gems names the first caller that is not
  # a `require`, so a hook of the profile between the app and Ruby's require moved that warning
  # onto loadscan's own file.
  BUNDLED_GEMS_WARNING = { "3.3" => "base64", "3.4" => "ostruct" }.freeze

  def test_a_profiled_boot_warns_of_a_bundled_gem_where_stock_does
    feature = BUNDLED_GEMS_WARNING[RUBY_VERSION[/\A\d+\.\d+/]] or
      skip "no default gem that warns of its move to a bundled gem on Ruby #{RUBY_VERSION} (3.3, 3.4)"
    with_files([["Gemfile", "source \"https://rubygems.org\"\n"], ["Gemfile.lock", "GEM\n  specs:\n\nPLATFORMS\n  ruby\n\nDEPENDENCIES\n"],
                ["boot.rb", "require \"bundler/setup\"\nrequire #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}\nrequire #{feature.inspect}\n"]]) do |dir|
      env = { "BUNDLE_GEMFILE" => File.join(dir, "Gemfile") }
      stock = run_ruby(file: "boot.rb", chdir: dir, env: env)
      profiled = run_ruby(file: "boot.rb", chdir: dir, env: env.merge("LOADSCAN_PROFILE" => File.join(dir, "boot.json")))
      assert stock.success? && profiled.success?, stock.stderr + profiled.stderr
      warning = stock.stderr.lines.first
      assert_match(/\Aboot\.rb:3: warning: #{feature} was loaded from the standard library/, warning)
      assert_equal warning, profiled.stderr.lines.first
    end
  end

  # LOADSCAN_PROFILE=path for a boot started by something else: the profile starts before the
  # app's boot (RUBYOPT, as `loadscan profile` does), covers Ruby's start before it, and its self
  # times add up to the boot's wall time as the parent measures it: from the spawn to the
  # process's last at_exit (registered before the profile's, so run after it), less the time
  # the profile took to write itself (it says so).
  def test_self_times_add_up_to_the_boot_measured_outside
    with_files([]) do |dir|
      app = profile_app(dir)
      out = File.join(dir, "boot.html")
      mark = File.join(dir, "end")
      boot = %(load "config/boot.rb"; Bundler.require(:default))
      env = app_env(app).merge("PROFILE_TEST_END" => mark)
      spawned, status, err = spawn_profiled(env, [RbConfig.ruby, "-e", boot], chdir: app, path: out, mark_last: mark)
      assert status.success?, err
      assert_match(/^boot: .* ms \(-e\)/, err, "the summary on stderr")
      assert_match(/^loadscan: profile written to #{Regexp.escape(out)} in [\d.]+ ms$/, err)
      entries = profile_entries(JSON.parse(File.read(out)[%r{<script type="application/json" id="profile-data">(.*?)</script>}m, 1]))
      written = Float(err[/profile written to .* in ([\d.]+) ms/, 1])
      wall = Float(File.read(mark)) - spawned - written
      self_sum = entries.sum { |e| e["self_wall"] }
      # 3%, and the 10 ms tick Linux gives the process's start time in (/proc/self/stat)
      assert_in_delta wall, self_sum, wall * 0.03 + 10, "self times #{self_sum} ms, the boot #{wall} ms"
      startup = entries[1]
      assert_equal "startup", startup["kind"], "Ruby's start before the profile is an entry"
      assert_slowgem(entries.find { |e| e["label"] == "slowgem" }, app)
    end
  end

  # Loadscan.profile in a script: every kind of entry; the block's self times add up to its wall
  # time; what was raised is raised; and `require_relative` still resolves against its caller
  # once the profile is over (Ruby's own `$LOADED_FEATURES` as without it).
  def test_profile_block_in_a_script
    with_files([["lib/a.rb", "require 'b'\n"], ["lib/b.rb", "module B; autoload :C, 'c'; end\n"], ["lib/c.rb", "module B::C; end\n"],
                ["sub/rel.rb", "require_relative 'rel2'\n"], ["sub/rel2.rb", ""], ["sub/after.rb", "require_relative 'after2'\n"],
                ["sub/after2.rb", ""], ["loaded.rb", "$loads = ($loads || 0) + 1\n"]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}
        Loadscan.profile { } # the profile's own files loaded (not the block's time)
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond)
        raised = nil
        tree = Loadscan.profile do
          require "a"
          sleep 0.5 # long enough for 3% to be more than the profile's own start and end (and a loaded machine's pauses there)
          B::C
          require_relative #{File.join(dir, "sub/rel").inspect}
          load #{File.join(dir, "loaded.rb").inspect}
          begin
            require "nope"
          rescue LoadError => e
            raised = e.message
          end
        end
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC, :float_millisecond) - t
        require_relative #{File.join(dir, "sub/after").inspect}
        back = unless tree.to_h.empty? # (none without loadscan)
          require "json"
          require #{File.join(Loadscan::TestSupport::LIB, "loadscan", "profile", "speedscope").inspect}
          Loadscan::Profile::Tree.from_speedscope(JSON.parse(Loadscan::Profile::Speedscope.render(tree))).to_h["entries"]
        end
        report("wall" => wall, "raised" => raised, "entries" => tree.to_h["entries"], "back" => back,
               "features" => $LOADED_FEATURES.select { |f| f.start_with?(#{dir.inspect}) })
      RUBY
      stock = run_ruby(code.sub(/tree = Loadscan.profile do(.*?)\n        end/m) { "tree = Struct.new(:to_h).new({});#{$1}" }, loadscan: false)
      run = run_ruby(code, loadscan: true)
      assert run.success?, run.stderr
      r = run.report
      labels = r["entries"].to_h { |e| [e["label"], e] }
      assert_equal %w[boot require require require require_relative require_relative load require],
                   r["entries"].map { |e| e["kind"] } - ["call"], "(calls: what the sampler saw of RubyGems' require)"
      assert_equal labels["a"]["id"], labels["b"]["parent"]
      assert_equal labels["Loadscan.profile"]["id"], labels["c"]["parent"], "the autoload, from the block"
      assert_equal labels[File.join(dir, "sub/rel")]["id"], labels["rel2"]["parent"]
      assert_equal "nope (raised)", r["entries"].reject { |e| e["kind"] == "call" }.last["label"]
      assert_equal "cannot load such file -- nope", r["raised"]
      assert_in_delta r["wall"], r["entries"].sum { |e| e["self_wall"] }, r["wall"] * 0.03
      assert_equal stock.report["features"], r["features"]
      # Written as speedscope's JSON and read back: the same entries, each figure to the µs (a
      # self figure: its own and its entries' roundings).
      r["entries"].zip(r["back"]).each do |e, b|
        assert_equal e.values_at("id", "parent", "kind", "label", "file", "gem", "allocated", "self_allocated"),
                     b.values_at("id", "parent", "kind", "label", "file", "gem", "allocated", "self_allocated")
        %w[start wall cpu gc self_wall self_cpu self_gc].each { |k| assert_in_delta e[k], b[k], 0.001 * (2 + r["entries"].size), "#{e["label"]}: #{k}" }
      end
    end
  end
  # A file whose time is mostly GC (it keeps 200,000 objects and runs a hundred full GCs): its own
  # time without GC and its GC apart, in the tree, the ranking and the report. GC is timed on the
  # wall clock (the extension's GC clock), so it lies within the file's wall time, and its own time
  # is what is left of it. The ranking is by own time, so a file that only computes for 150 ms of
  # CPU (busy) comes before it though its wall time is shorter. The order is checked against the
  # entries' own figures, not a fixed one: on a loaded machine a trivial file may pause long.
  def test_gc_is_apart_where_it_dominates_a_file
    busy = "t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)\n" \
           "n = 0\nn += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - t < 150_000_000\n"
    with_files([["lib/gcheavy.rb", "$keep = Array.new(200_000) { Object.new }\n100.times { GC.start }\n"], ["lib/busy.rb", busy],
                ["lib/light.rb", "$light = 1\n"]]) do |dir|
      run = run_ruby!(<<~RUBY, loadscan: true)
        $LOAD_PATH.unshift(#{File.join(dir, "lib").inspect})
        require #{File.join(Loadscan::TestSupport::LIB, "loadscan/profile/report").inspect}
        tree = Loadscan.profile { require "gcheavy"; require "busy"; require "light" }
        heavy = tree.entries.find { |e| e.label == "gcheavy" }
        own = tree.entries.select { |e| e.kind == :require }.to_h { |e| [e.label, Loadscan::Profile::Tree.own(e)] }
        report("heavy" => tree.to_h["entries"][heavy.id], "own" => own, "ranked" => tree.features.map(&:label),
               "report" => Loadscan::Profile::Report.text(tree))
      RUBY
      r = run.report
      heavy = r["heavy"]
      assert_operator heavy["self_gc"], :>, heavy["self_wall"] / 2, "GC is most of its time: #{heavy.inspect}"
      assert_operator heavy["self_gc"], :<=, heavy["self_wall"], "GC's time lies within the file's"
      assert_in_delta heavy["self_wall"] - heavy["self_gc"], r["own"]["gcheavy"], 0.001
      assert_equal %w[busy gcheavy light], r["own"].keys.sort
      assert_equal r["own"].sort_by { |_, ms| -ms }.map(&:first), r["ranked"], "by own time without GC: #{r["own"].inspect}"
      line = r["report"].find { |l| l.include?("gcheavy [") }
      assert_includes line, format("%.1f ms", r["own"]["gcheavy"]), "its own time without GC first"
      assert_includes line, "(GC #{format("%.1f ms", heavy["self_gc"])};", "its GC beside"
    end
  end
  # LOADSCAN_PROFILE starts the profile in loadscan/setup (or Loadscan.setup): requiring
  # loadscan alone loads nothing of it and writes nothing.
  def test_requiring_loadscan_starts_no_profile
    with_files([]) do |dir|
      out = File.join(dir, "boot.json")
      run = run_ruby!(<<~RUBY, loadscan: false, env: { "LOADSCAN_PROFILE" => out })
        require #{File.join(Loadscan::TestSupport::LIB, "loadscan").inspect}
        report("loaded" => $LOADED_FEATURES.grep(%r{/loadscan/profile}))
      RUBY
      assert_equal [], run.report["loaded"]
      refute File.exist?(out), "no profile written"
      run_ruby!(%(require #{File.join(Loadscan::TestSupport::LIB, "loadscan/setup").inspect}), loadscan: false, env: { "LOADSCAN_PROFILE" => out })
      assert File.file?(out), "loadscan/setup starts it"
    end
  end
end
