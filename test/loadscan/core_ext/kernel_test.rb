# frozen_string_literal: true

require_relative "../../test_helper"

# Kernel#require with loadscan must answer exactly as stock Ruby: same return values, same
# $LOADED_FEATURES, same errors. Every test runs the same script in two fresh processes.
class KernelRequireTest < Minitest::Test
  # Runs `code` with loadscan twice on one cache dir (each against stock): a boot that leaves a
  # miss Ruby's table of extensions without a file might answer to Ruby's own search, and the
  # next, which knows what Ruby raised LoadError for. The loadscan runs' stats, cold then warm.
  def cold_then_warm(code, **opts)
    Dir.mktmpdir("loadscan-learned") do |cache|
      Array.new(2) { assert_same_as_stock_with_cache(code, cache, **opts).report["stats"] }
    end
  end

  # `try(feature, via: :kernel)`: requires (through Kernel.require with `via: :singleton`) and
  # records the outcome in RESULTS, with the LoadError's first frame and its label.
  TRY = <<~RUBY
    def label(feature) = feature.is_a?(String) ? feature : "#<\#{feature.class}>"
    def try(feature, via: :kernel)
      r = via == :kernel ? require(feature) : Kernel.require(feature)
      RESULTS << [label(feature), r]
    rescue LoadError => e
      RESULTS << [label(feature), e.class.name, e.message, e.path, e.backtrace.first.sub(__dir__, "TMP"),
                  e.backtrace_locations&.first&.label]
    rescue TypeError, ArgumentError => e
      RESULTS << [feature.class.name, e.class.name, e.message]
    end
  RUBY

  # require_script running `body`, which calls `try` for the requires it makes.
  def script(load_path, body) = require_script(load_path, setup: TRY + body)

  def log_file(name) = "$log << #{name.inspect}"

  def test_shadowing_and_spellings_match_stock
    with_files([["e1/a.rb", log_file("e1/a")], ["e2/a.rb", log_file("e2/a")], ["e2/b.rb", log_file("e2/b")],
                ["e1/d/c.rb", log_file("e1/d/c")], ["e2/d/c.rb", log_file("e2/d/c")]]) do |dir|
      lp = %W[#{dir}/e1 #{dir}/e2]
      stock, = assert_same_as_stock(script(lp, <<~RUBY))
        %w[a a.rb b d/c d//c d/./c.rb d/../d/c e2/../b nope nope.rb nope.so].each { |f| try(f) }
      RUBY
      assert_equal [["a", true], ["a.rb", false], ["b", true], ["d/c", true]], stock.report["results"].first(4)
    end
  end

  def test_rb_in_a_later_entry_beats_so_in_an_earlier_one
    with_files([["e2/foo.rb", log_file("e2/foo")], ["e2/bar.rb", log_file("e2/bar")]]) do |dir|
      install_ext(dir, "e1/foo.so")
      install_ext(dir, "e1/bar.so")
      install_ext(dir, "e1/baz.so")
      lp = %W[#{dir}/e1 #{dir}/e2]
      stock, = assert_same_as_stock(script(lp, "%w[foo bar.so baz.o baz foo.so qux.bundle].each { |f| try(f) }"))
      assert_equal ["e2/foo"], stock.report["log"]
    end
  end

  def test_already_loaded_under_another_spelling_or_entry_is_not_loaded_again
    with_files([["e1/a.rb", log_file("e1/a")], ["e0/a.rb", log_file("e0/a")], ["e1/s/x.rb", log_file("x")]]) do |dir|
      File.symlink("#{dir}/e1", "#{dir}/e1link")
      stock, = assert_same_as_stock(script(["#{dir}/e1"], <<~RUBY), chdir: dir)
        try("a")
        $LOAD_PATH.unshift(#{"#{dir}/e0".inspect})   # an earlier entry also provides a
        try("a"); try("a.rb")
        try("s/x"); $LOAD_PATH.unshift(#{"#{dir}/e1link".inspect}); try("s/x")
        try("#{dir}/e1/a.rb"); try("./e1/a"); try("./e0/a.rb")
      RUBY
      assert_equal %w[e1/a x e0/a], stock.report["log"]
    end
  end

  def test_requiring_again_after_a_native_extension_or_an_extensionless_feature
    with_files([["e3/bar.rb", log_file("e3/bar")], ["e4/foo.rb", log_file("e4/foo")]]) do |dir|
      install_ext(dir, "e1/foo.so")
      install_ext(dir, "e1/baz.so")
      stock, = assert_same_as_stock(script(["#{dir}/e1"], <<~RUBY))
        try("foo"); try("foo"); try("baz"); try("baz"); try("baz.so")
        $LOAD_PATH.push(#{"#{dir}/e4".inspect}); try("foo")   # a .rb appears: Ruby loads it
        $LOADED_FEATURES << #{"#{dir}/e3/bar".inspect}        # provided without extension
        $LOAD_PATH.push(#{"#{dir}/e3".inspect}); try("bar"); try("bar")
      RUBY
      assert_equal %w[e4/foo e3/bar], stock.report["log"]
    end
  end

  def test_edits_of_loaded_features_are_followed
    with_files([["e/a.rb", log_file("a")], ["e/b.rb", log_file("b")], ["e/c.rb", log_file("c")]]) do |dir|
      assert_same_as_stock(script(["#{dir}/e"], <<~RUBY))
        try("a"); try("b"); try("c")
        $LOADED_FEATURES.delete_if { |f| f.end_with?("/a.rb") }; try("a")
        $LOADED_FEATURES.reject! { |f| f.end_with?("/b.rb") }; try("b")
        $LOADED_FEATURES.replace($LOADED_FEATURES.reject { |f| f.end_with?("/c.rb") }); try("c")
        saved = $LOADED_FEATURES.dup
        $LOADED_FEATURES.clear; try("a"); try("b")
        $LOADED_FEATURES.replace(saved)
        $LOADED_FEATURES.pop; $LOADED_FEATURES << #{"#{dir}/e/c.rb".inspect}; try("c")
        $LOADED_FEATURES << #{"#{dir}/e/zz.rb".inspect}; try("zz")
      RUBY
    end
  end

  # A re-require is answered `false` when the file the index finds is in $LOADED_FEATURES under
  # its own absolute path; every other case goes to Ruby. Each edit below is followed by
  # requires of the edited features and of ones left loaded, in several spellings.
  def test_every_edit_of_loaded_features_is_seen_by_the_next_re_require
    files = %w[a b c d f g h x new].map { |n| ["e/#{n}.rb", log_file(n)] } + [["e/sub/s.rb", log_file("s")]]
    with_files(files) do |dir|
      e = "#{dir}/e"
      assert_same_as_stock(script([e], <<~RUBY))
        def again = %w[a a.rb b c d f g h x sub/s sub//s.rb].each { |f| try(f) }
        def attempt
          RESULTS << [:ok, yield.class.name]
        rescue StandardError => e # the messages of frozen Arrays list them: only the class
          RESULTS << [:raised, e.class.name]
        end
        again
        $LOADED_FEATURES.delete(#{"#{e}/a.rb".inspect}); again
        $".delete_if { |p| p.end_with?("/b.rb") }; again
        $LOADED_FEATURES.reject! { |p| p.end_with?("/c.rb") }; again
        $LOADED_FEATURES.delete(#{"#{e}/d.rb".inspect}); $LOADED_FEATURES << #{"#{e}/d".inspect}; again
        $LOADED_FEATURES.delete(#{"#{e}/f.rb".inspect}); $LOADED_FEATURES << "f.rb"; again
        $LOADED_FEATURES.delete(#{"#{e}/g.rb".inspect}); $LOADED_FEATURES << #{"#{e}/../e/g.rb".inspect}; again
        $LOADED_FEATURES.delete(#{"#{e}/h.rb".inspect}); $LOADED_FEATURES << #{"#{e}/h.so".inspect}; again
        $LOADED_FEATURES.delete(#{"#{e}/x.rb".inspect}); $LOADED_FEATURES << #{"#{e}/x.txt".inspect}; again
        $LOADED_FEATURES.replace($LOADED_FEATURES.reject { |p| p.end_with?("/s.rb") }); again
        saved = $LOADED_FEATURES.dup
        $LOADED_FEATURES.clear; again
        $LOADED_FEATURES.replace(saved); again
        attempt { $LOADED_FEATURES = [] }; attempt { $" = saved.dup }; again
        $LOADED_FEATURES.freeze; again
        attempt { require "new" }; attempt { $LOADED_FEATURES.delete(#{"#{e}/a.rb".inspect}) }
      RUBY
    end
  end

  def test_a_feature_being_loaded_by_another_thread_is_waited_for
    with_files([["e/slow.rb", '$log << "start"; $started = true; sleep 0.3; $log << "end"'], ["e/w.rb", log_file("w")]]) do |dir|
      stock, = assert_same_as_stock(script(["#{dir}/e"], <<~RUBY))
        require "w"
        t = Thread.new { require "slow" }
        Thread.pass until $started
        $log << "main: \#{require("slow")} \#{require("w")}"
        $log << "thread: \#{t.value}"
      RUBY
      assert_equal ["w", "start", "end", "main: false false", "thread: true"], stock.report["log"]
    end
  end

  def test_every_load_path_mutation_is_seen_before_the_next_require
    files = (1..6).flat_map { |i| [["e#{i}/m.rb", log_file("e#{i}/m")], ["e#{i}/only#{i}.rb", ""]] }
    with_files(files) do |dir|
      e = ->(i) { "#{dir}/e#{i}" }
      assert_same_as_stock(script([], <<~RUBY))
        def probe = RESULTS << [$LOAD_PATH.resolve_feature_path("m"), (1..6).map { |i| $LOAD_PATH.resolve_feature_path("only\#{i}") }]
        $LOAD_PATH.push(#{e[1].inspect}); probe; try("only1")
        $LOAD_PATH << #{e[2].inspect}; probe
        $LOAD_PATH.unshift(#{e[3].inspect}); probe; try("only3")
        $LOAD_PATH.insert(1, #{e[4].inspect}); probe
        $LOAD_PATH.concat([#{e[5].inspect}], [#{e[6].inspect}]); probe; try("only6")
        $LOAD_PATH.delete(#{e[3].inspect}); probe
        $LOAD_PATH.filter! { |p| !p.to_s.end_with?("e4") }; probe
        $LOAD_PATH[0] = #{e[2].inspect}; probe
        $LOAD_PATH.shift; probe
        $LOAD_PATH.pop; $LOAD_PATH.push(#{e[4].inspect}); probe
        $LOAD_PATH.rotate!; probe
        $LOAD_PATH.map! { |p| p }; probe
        $LOAD_PATH.reverse!; probe
        saved = $LOAD_PATH.dup
        $LOAD_PATH.replace([#{e[5].inspect}] + saved); probe; try("m")
        $LOAD_PATH.clear; probe; try("only2")
        $LOAD_PATH.replace(saved); try("only2")
      RUBY
    end
  end

  def test_kernel_require_with_an_explicit_receiver
    with_files([["e/k.rb", log_file("k")], ["e/j.rb", log_file("j")]]) do |dir|
      assert_same_as_stock(script(["#{dir}/e"], 'try("k", via: :singleton); try("k"); try("j"); try("j", via: :singleton); try("nope", via: :singleton)'))
    end
  end

  def test_load_errors_keep_rubys_message_and_path
    with_files([["e/raiser.rb", "require 'missing_inside'"], ["e/dir.rb/x.rb", ""]]) do |dir|
      stock, = assert_same_as_stock(script(["#{dir}/e"], %w[nope raiser dir.rb dir x/../../e/x].map { |f| "try(#{f.inspect})" }.join("\n")))
      assert_includes stock.report["results"].map { |r| r.first(4) }, ["nope", "LoadError", "cannot load such file -- nope", "nope"]
    end
  end

  # Misses the index is sure of are answered with Ruby's own LoadError (class, message, path,
  # backtrace), without searching: optional requires, versioned native paths, `.so`/`.rb`
  # spellings, misses below directories that exist and that do not.
  def test_misses_raise_rubys_load_error
    with_files([["e1/opt/present.rb", ""], ["e2/x.rb", ""]]) do |dir|
      # Directories changed within a second of their listing are asked of Ruby (racy): these
      # were made just now, so they are dated back.
      backdate(dir, %w[e1 e1/opt e2])
      code = <<~RUBY
        def optional(f)
          require f
          :loaded
        rescue LoadError => e
          [:rescued, e.message, e.path, e.backtrace.first(2).map { _1.sub(__dir__, "TMP") }]
        end
        %w[#{MISSES.join(" ")}].each { |f| try(f) }
        RESULTS << optional("opt/absent")
        try("absent", via: :singleton)
      RUBY
      cold, warm = cold_then_warm(script(%W[#{dir}/e1 #{dir}/e2], code))
      # The first boot leaves the first miss of each spelling Ruby's table might hold (all but
      # `absent.rb`) to Ruby's own search; every miss of the next one is loadscan's, sure.
      asked = MISSES.count { !_1.end_with?(".rb") }
      assert_equal [MISSES.size + 2 - asked, asked], [cold[:misses], cold[:left_to_ruby][:unsure_miss]], cold.inspect
      assert_equal [MISSES.size + 2, 0], [warm[:misses], warm[:left_to_ruby][:unsure_miss]], warm.inspect
    end
  end
  MISSES = %w[opt/absent absent absent.so absent.rb 3.1/native_ext opt/present/deeper x/y].freeze

  # A file created after its directory was listed (an application directory, volatile) is found
  # as stock finds it, and a miss before it changes nothing: the directory where the file would
  # be is asked once per volatile entry before a miss is answered.
  def test_files_created_after_a_miss_are_found
    with_files([["e/a.rb", log_file("a")], ["stash/moved/m.rb", log_file("moved/m")]]) do |dir|
      e = ->(rel) { File.join(dir, "e", rel).inspect }
      code = script(["#{dir}/e"], <<~RUBY)
        # The tree as it was before any run (each run changes it).
        File.delete(#{e["later.rb"]}) if File.exist?(#{e["later.rb"]})
        FileUtils.rm_rf(#{e["sub"]})
        File.rename(#{e["moved"]}, #{"#{dir}/stash/moved".inspect}) if File.exist?(#{e["moved"]})
        File.utime(Time.now - 3600, Time.now - 3600, #{"#{dir}/stash/moved".inspect})
        sleep 1.2 # past the racy window of the directories' own mtimes
        # Ruby's own search raises LoadError for these first (its table of extensions without
        # a file lacks them too): loadscan's misses after that are its own.
        %w[later sub/later moved/m].each { |f| begin; require f; rescue LoadError; end }
        try("a"); try("later"); try("sub/later"); try("moved/m")
        File.write(#{e["later.rb"]}, #{log_file("later").inspect})
        Dir.mkdir(#{e["sub"]}); File.write(#{e["sub/later.rb"]}, #{log_file("sub/later").inspect})
        File.rename(#{"#{dir}/stash/moved".inspect}, #{e["moved"]}) # keeps its old mtime
        try("later"); try("sub/later"); try("moved/m")
      RUBY
      stock, fast = assert_same_as_stock("require 'fileutils'\n" + code)
      assert_equal %w[a later sub/later moved/m], stock.report["log"]
      stats = fast.report["stats"]
      assert_equal 3, stats[:misses], stats.inspect
    end
  end

  # RubyGems' retry: a feature on no entry is in a gem not activated yet. loadscan's LoadError
  # carries the feature as `path`, so RubyGems activates the gem and requires it again.
  def test_a_miss_that_rubygems_then_activates
    with_files([["gems/specifications/lateg-1.0.gemspec", <<~RUBY], ["gems/gems/lateg-1.0/lib/lateg.rb", log_file("lateg")]]) do |dir|
      Gem::Specification.new do |s|
        s.name = "lateg"; s.version = "1.0"; s.summary = "a gem"; s.authors = ["t"]; s.files = ["lib/lateg.rb"]
      end
    RUBY
      code = script([], 'try("lateg"); try("lateg"); RESULTS << Gem.loaded_specs.key?("lateg") ' \
                        '<< $LOADED_FEATURES.grep(/lateg/).size')
      env = { "GEM_PATH" => "#{dir}/gems#{File::PATH_SEPARATOR}#{Gem.path.join(File::PATH_SEPARATOR)}" }
      stock, = run_both(code, env: env)
      assert_equal [["lateg", true], ["lateg", false], true, 1], stock.report["results"]
      # The warm boot's miss is loadscan's own LoadError, which RubyGems retries.
      _, warm = cold_then_warm(code, env: env)
      assert_operator warm[:misses], :>=, 1, warm.inspect
    end
  end

  def test_features_ruby_provides_itself
    features = %w[enumerator thread rational.so complex fiber.so ruby2_keywords enumerator.so thread.rb]
    _, fast = assert_same_as_stock(script([], features.map { |f| "try(#{f.inspect})" }.join("\n")))
    # Provided when Ruby starts: never left to Ruby's search as a miss its table of extensions
    # without a file might answer (one a file on the load path shares a name with is Ruby's to
    # decide: `loaded`).
    stats = fast.report["stats"]
    assert_equal 0, stats[:left_to_ruby][:unsure_miss], stats.inspect
    assert_equal features.size, stats[:hits] + stats[:left_to_ruby][:loaded], stats.inspect
  end

  def test_feature_objects_are_converted_like_ruby_does
    with_files([["e/pn.rb", log_file("pn")], ["e/ts.rb", log_file("ts")]]) do |dir|
      assert_same_as_stock(script(["#{dir}/e"], <<~RUBY))
        require "pathname"
        try(Pathname("pn")); try("pn")
        ts = Object.new; def ts.to_str = "ts"; try(ts); try("ts.rb")
        try(42); try(nil); try(:pn); try("a\\0b")
      RUBY
    end
  end

  def test_relative_and_home_features_are_rubys_business
    with_files([["cwd/r.rb", log_file("cwd/r")], ["e/r.rb", log_file("e/r")], ["home/h.rb", log_file("h")],
                ["cwd/sub/s.rb", log_file("s")]]) do |dir|
      assert_same_as_stock(script(["#{dir}/e"], <<~RUBY), chdir: "#{dir}/cwd", env: { "HOME" => "#{dir}/home" })
        try("./r"); try("r"); try("../e/r"); try("~/h"); try("sub/s")
        $LOAD_PATH.unshift("."); try("sub/s"); try("r")
      RUBY
    end
  end

  def test_autoload_goes_through_require_and_require_relative_and_load_do_not
    with_files([["e/auto_me.rb", "#{log_file("auto")}; module AutoMe; end"], ["e/rel.rb", log_file("rel")],
                ["e/lo.rb", log_file("lo")]]) do |dir|
      assert_same_as_stock(script(["#{dir}/e"], <<~RUBY))
        autoload :AutoMe, "auto_me"
        AutoMe
        try("auto_me")
        require_relative #{"#{dir}/e/rel".inspect}; try("rel")
        load "lo.rb"; load "lo.rb"; try("lo")
      RUBY
    end
  end

  def test_concurrent_requires_of_the_same_features_from_threads
    files = (1..40).map { |i| ["e/t#{i}.rb", "sleep 0.001; #{log_file("t#{i}")}"] }
    with_files(files) do |dir|
      stock, fast = assert_same_as_stock(script(["#{dir}/e"], <<~RUBY))
        threads = 8.times.map { |n| Thread.new { (1..40).to_a.rotate(n * 5).map { |i| require("t\#{i}") } } }
        loaded = threads.map(&:value)
        RESULTS << loaded.flatten.count(true)
        $log.sort!
        $LOADED_FEATURES.sort!
      RUBY
      assert_equal 40, stock.report["results"].last
      assert_equal 40, fast.report["log"].uniq.size
    end
  end

  def test_circular_requires_warn_like_stock
    with_files([["e/c1.rb", "require 'c2'"], ["e/c2.rb", "require 'c1'"]]) do |dir|
      # The same report, and the same warning and backtrace on stderr (each run's script lives
      # in a temp dir of its own, named the same in both: Result#stderr_normalized).
      stock, = assert_same_as_stock(script(["#{dir}/e"], 'try("c1")'), ruby_opts: ["-W"])
      assert_match(/circular require considered harmful/, stock.stderr)
    end
  end

  def test_loadscan_loads_no_library_on_its_own_behalf
    stock, fast = assert_same_as_stock("report('loaded_features' => $LOADED_FEATURES.dup)")
    assert_operator fast.loaded_features.count { |f| own_feature?(f) }, :>=, 3
    assert_empty stock.loaded_features.select { |f| own_feature?(f) }
  end
end
