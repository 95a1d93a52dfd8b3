# frozen_string_literal: true

require_relative "../test_helper"

# Features, paths and messages in encodings other than the file system's: the same answers, and
# strings in the same encodings, as stock Ruby's.
class EncodingTest < Minitest::Test
  def test_feature_name_in_another_encoding
    with_files([["a/café.rb", "$loaded = :utf8"], ["b/caf\xE9.rb".b, "$loaded = :raw"], ["b/café.rb", "$loaded = :b"]]) do |dir|
      code = <<~RUBY
        # encoding: utf-8
        Encoding.default_internal = Encoding::UTF_8
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect}, #{"#{dir}/b".inspect})
        r = require "caf\\xE9".dup.force_encoding("ISO-8859-1")
        report("r" => r, "loaded" => $loaded, "last" => $LOADED_FEATURES.last.b,
               "last_encoding" => $LOADED_FEATURES.last.encoding.name)
      RUBY
      # With RubyGems 3.5 (Ruby 3.3) in front, the name reaches loadscan converted already.
      [[], ["--disable-gems"]].each do |opts|
        _, fast = assert_same_as_stock(code, ruby_opts: opts)
        assert_equal :utf8, fast.report["loaded"], opts.inspect
      end
    end
  end

  # Issue 20, item 14. The strings loadscan builds have the encodings Ruby's own give: a miss's
  # `LoadError#message` is ASCII-8BIT for an ASCII feature (the feature's encoding otherwise),
  # and a found path is in the file system's encoding for a binary or US-ASCII feature, so it is
  # `==` to `File.expand_path` of the file (the feature's encoding otherwise).
  def test_encodings_of_messages_and_paths_as_in_stock
    with_files([["a/found.rb", ""], ["a/café.rb", ""]]) do |dir|
      code = <<~RUBY
        $LOAD_PATH.unshift(#{"#{dir}/a".inspect})
        features = ["found", "café"].product(%w[BINARY US-ASCII UTF-8 ISO-8859-1]).map do |f, enc|
          f.dup.force_encoding(enc)
        end.reject { |f| !f.valid_encoding? }
        paths = features.map do |f|
          path = $LOAD_PATH.resolve_feature_path(f)[1]
          [f.encoding.name, path.encoding.name, path == File.expand_path(#{"#{dir}/a/".inspect} + f.b + ".rb")]
        end
        messages = ["nope", "nopé", "nopé".b, "nope".encode("US-ASCII")].map do |f|
          require f
        rescue LoadError => e
          [f.encoding.name, e.message.encoding.name, e.message.b]
        end
        require "found".b
        report("paths" => paths, "messages" => messages, "last" => $LOADED_FEATURES.last.encoding.name,
               "loaded_features" => $LOADED_FEATURES.dup)
      RUBY
      stock, = assert_same_as_stock(code)
      assert_includes stock.report["paths"], ["ASCII-8BIT", "UTF-8", true]
    end
  end
end
