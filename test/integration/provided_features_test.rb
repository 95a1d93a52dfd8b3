# frozen_string_literal: true

require_relative "../test_helper"

# Features a Ruby provides with no file, against stock (issue 17): the extensions a Ruby built
# with `--with-static-linked-ext` links in (`RbConfig::CONFIG["EXTSTATIC"] == "static"`: found
# by Ruby's search only after every entry, in a table of its own), and Ruby 4.0's core `set`
# (provided as `set.rb`: `require "set"` is false) and `pathname` (provided as `pathname.so`:
# `require "pathname"` still loads `pathname.rb`), modelled here by providing a feature by hand.
class ProvidedFeaturesTest < Minitest::Test
  # Ruby's own extensions, as a program requires them; a static Ruby links them in.
  EXTENSIONS = %w[etc etc.so digest digest.so digest/md5 digest/sha2 json/ext json json/ext/parser
                  json/ext/generator io/console io/console.so io/wait io/nonblock stringio strscan zlib date
                  date_core socket socket.so psych psych.so objspace coverage pty fcntl ripper monitor
                  monitor.so pathname pathname.so erb/escape cgi/escape rbconfig/sizeof openssl openssl.so
                  bigdecimal].freeze

  # Which of EXTENSIONS this Ruby provides with no file ($LOAD_PATH.resolve_feature_path gives
  # a bare name, as for `etc.so`, instead of a path).
  def linked_in(ruby_opts)
    run = run_ruby(<<~RUBY, loadscan: false, ruby_opts: ruby_opts)
      names = #{EXTENSIONS.inspect}
      report(names.select { |f| (p = $LOAD_PATH.resolve_feature_path(f) rescue nil) && !p[1].start_with?("/") })
    RUBY
    assert run.success?, run.stderr
    run.report
  end

  # Requires each feature twice (and `etc.rb`, which no table holds), as stock does.
  def requires_of(features)
    <<~RUBY
      def try
        yield
      rescue LoadError => e
        [e.class.name, e.message, e.path]
      end
      results = #{features.inspect}.map { |f| [f, try { require f }, try { require f }] }
      results << ["etc.rb", try { require "etc.rb" }]
      report("results" => results, "loaded_features" => $LOADED_FEATURES.dup,
             "resolved" => %w[etc json/ext].map { |f| $LOAD_PATH.resolve_feature_path(f) rescue $!.class.name })
    RUBY
  end

  def test_every_extension_requires_as_stock
    [[], ["--disable-gems"]].each do |opts|
      provided = linked_in(opts)
      # The static Ruby of the matrix provides these with no file (issue 17's list).
      # (`digest` and `json/ext` are .rb files requiring the linked-in digest.so and json/ext/parser.)
      assert_empty %w[etc digest.so json/ext/parser io/console] - provided, provided.inspect if RbConfig::CONFIG["EXTSTATIC"] == "static"
      _, fast = assert_same_as_stock(requires_of(EXTENSIONS), ruby_opts: opts)
      assert_operator fast.stats[:hits], :>, 0, "#{opts}: loadscan answered nothing" if fast.stats
    end
  end

  # Everything this Ruby provides with no file, found without a list of names: every string in
  # its binaries that could be a native feature's name (`*.so`), kept when Ruby's own search
  # answers it with an empty $LOAD_PATH (then only its table of linked-in extensions can).
  # Ruby 3.3 and 3.4 provide Prism's `prism/prism.so` so (what `require "prism"` needs), a
  # static build every extension.
  DISCOVER = <<~RUBY
    bins = [RbConfig.ruby, File.join(RbConfig::CONFIG["libdir"], RbConfig::CONFIG["LIBRUBY_SO"].to_s)].select { File.file?(_1) }
    names = bins.flat_map { |b| File.binread(b).scan(%r{[A-Za-z0-9_/.-]+\.so(?=\0)}) }.uniq
    $LOAD_PATH.clear
    report(names.select { |n| (r = $LOAD_PATH.resolve_feature_path(n) rescue nil) && !r[1].start_with?("/") }.sort)
  RUBY

  def test_every_feature_this_ruby_provides_without_a_file_requires_as_stock
    run = run_ruby(DISCOVER, loadscan: false)
    assert run.success?, run.stderr
    provided = run.report
    assert_includes provided, "prism/prism.so", "Ruby #{RUBY_VERSION} links Prism in" if RUBY_VERSION >= "3.3"
    assert_operator provided.size, :>, 50, provided.inspect if RbConfig::CONFIG["EXTSTATIC"] == "static"
    # Each as a program spells it (bare, then `.so`), behind a miss of each, twice; `prism`
    # itself where there is one.
    features = provided.flat_map { [_1.delete_suffix(".so"), _1] }
    features.unshift("prism") if provided.include?("prism/prism.so")
    [[], ["--disable-gems"]].each do |opts|
      _, fast = assert_same_as_stock(requires_of(features), ruby_opts: opts)
      assert_operator fast.stats[:hits], :>, 0, "#{opts}: loadscan answered nothing" if fast.stats && features.include?("prism")
    end
  end

  def test_extensions_provided_without_a_file_after_a_miss_and_under_bundler_style_load_paths
    # `json` first (it requires json/ext, then json/ext/parser and generator, linked in on a
    # static Ruby), with app entries in front that have none of them.
    with_files([["app/lib/thing.rb", "THING = 1"], ["app/vendor/.keep", ""]]) do |dir|
      code = "$LOAD_PATH.unshift(#{"#{dir}/app/lib".inspect}, #{"#{dir}/app/vendor".inspect})\n" \
             "require 'thing'\n#{requires_of(%w[json digest/sha2 etc io/console date])}"
      assert_same_as_stock(code)
    end
  end

  def test_a_feature_provided_without_a_file_is_not_required_again
    # Ruby 4.0's `set`: provided as "set.rb" by the core, so `require "set"` is false with
    # nothing loaded; here a directory of the same name on the load path has other files.
    with_files([["a/core_set/sorted.rb", "$sorted = 1"]]) do |dir|
      assert_same_as_stock(<<~RUBY)
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        $LOADED_FEATURES << "core_set.rb"
        so = begin; require("core_set.so"); rescue LoadError => e; e.message; end
        r = [require("core_set"), require("core_set.rb"), so, require("core_set/sorted")]
        report("r" => r, "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
    end
  end

  def test_an_rb_beside_a_feature_provided_as_an_extension_is_loaded
    # Ruby 4.0's `pathname`: the core provides "pathname.so", and `require "pathname"` still
    # loads pathname.rb (Ruby searches for the .rb only); `require "pathname.so"` is false.
    with_files([["a/core_path.rb", "$core_path = ($core_path || 0) + 1"], ["b/core_path.so", ""]]) do |dir|
      assert_same_as_stock(<<~RUBY)
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect}, #{"#{dir}/b".inspect})
        $LOADED_FEATURES << "core_path.so"
        r = [require("core_path.so"), require("core_path"), require("core_path"), $core_path]
        report("r" => r, "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
    end
  end
end
