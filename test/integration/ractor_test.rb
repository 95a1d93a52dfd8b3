# frozen_string_literal: true

require_relative "../test_helper"

# Ractors and `require` (issue 17). From Ruby 3.4 the first `Ractor.new` prepends a module to
# Kernel (`<RactorRequire>`) whose #require, in a non-main Ractor, has the main Ractor run
# `require` through the whole Kernel#require chain (so loadscan serves it there), and in the
# main Ractor calls `super`. On 3.1 and 3.3 a non-main Ractor's require runs in that Ractor
# (where loadscan leaves it to Ruby). Each case: a Ractor created before or after setup, with
# RubyGems and without (where Kernel#require itself is Ruby's C function), against stock.
class RactorTest < Minitest::Test
  SETUP = Loadscan::TestSupport::RubyProcess::SETUP
  FORWARDS = RUBY_VERSION >= "3.4" # a non-main Ractor's require runs on the main Ractor

  FILES = [["a/main_one.rb", "$main_one = :a"], ["a/in_ractor.rb", "IN_RACTOR = :a"],
           ["b/in_ractor.rb", "IN_RACTOR = :b"], ["b/later.rb", "LATER = :b"]].freeze

  # The program: a Ractor before setup or not, loadscan's setup (in the loadscan run), then
  # requires from the main Ractor and from a new Ractor, found, already loaded and missing.
  def program(dir, before:)
    <<~RUBY
      Warning[:experimental] = false
      $LOAD_PATH.unshift(#{"#{dir}/a".inspect}, #{"#{dir}/b".inspect})
      Ractor.new { :first }.#{RACTOR_VALUE} if #{before}
      require #{SETUP.inspect} unless ENV["LOADSCAN_TEST_STOCK"]
      def try
        yield
      rescue Exception => e # rubocop:disable Lint/RescueException
        [e.class.name, e.message, (e.path if e.respond_to?(:path))]
      end
      main = [try { require "main_one" }, try { require "main_one" }, try { require "main_missing" }]
      hits = defined?(Loadscan) && Loadscan.stats[:hits]
      ractor = Ractor.new do
        def try
          yield
        rescue Exception => e # rubocop:disable Lint/RescueException
          [e.class.name, e.message, (e.path if e.respond_to?(:path))]
        end
        [try { require "in_ractor" }, try { require "in_ractor" }, try { require "ractor_missing" },
         try { Kernel.require "later" }, try { defined?(IN_RACTOR) && IN_RACTOR }]
      end.#{RACTOR_VALUE}
      hits = defined?(Loadscan) && Loadscan.stats[:hits] - hits
      after = [try { require "in_ractor" }, defined?(IN_RACTOR) && IN_RACTOR, defined?(LATER) && LATER]
      report("main" => main, "ractor" => ractor, "after" => after, "loaded_features" => $LOADED_FEATURES.dup,
             "engaged" => defined?(Loadscan) ? Loadscan.engaged? : true,
             "ractor_hits" => hits)
    RUBY
  end

  def check(before:, ruby_opts: [])
    with_files(FILES) do |dir|
      code = program(dir, before: before)
      stock = run_ruby(code, loadscan: false, ruby_opts: ruby_opts)
      fast = run_ruby(code, loadscan: nil, ruby_opts: ruby_opts)
      label = "Ractor #{before ? "before" : "after"} setup #{ruby_opts.join(" ")}"
      assert stock.success?, "#{label}: stock failed:\n#{stock.stderr}"
      assert fast.success?, "#{label}: loadscan failed:\n#{fast.stderr}"
      # The same answers, $LOADED_FEATURES and stderr (no warning).
      assert_same_run(stock, fast, label, only: %w[main ractor after engaged])
      assert_equal true, fast.report["engaged"], "#{label}: #{fast.stderr}"
      assert_equal :a, fast.report["after"][1], label if FORWARDS
      # The requires 3.4 forwards to the main Ractor are served there (in_ractor and later).
      assert_operator fast.report["ractor_hits"], :>=, 2, label if FORWARDS
    end
  end

  def test_ractor_created_before_setup
    check(before: true)
  end

  def test_ractor_created_after_setup
    check(before: false)
  end

  def test_ractor_created_before_setup_without_rubygems
    check(before: true, ruby_opts: ["--disable-gems"])
  end

  def test_ractor_created_after_setup_without_rubygems
    check(before: false, ruby_opts: ["--disable-gems"])
  end
end
