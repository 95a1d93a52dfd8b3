# frozen_string_literal: true

module Loadscan
  # What the command line prints is built from paths, and a path is bytes: not necessarily UTF-8,
  # and as the extension gives it (ASCII-8BIT) or Ruby does (the file system's encoding). So:
  #
  # - every string is first taken as UTF-8 bytes, unchanged (`utf8`), so that answers from both
  #   can be compared and joined;
  # - in text, a control character or a byte that is not part of valid UTF-8 is shown as `\xNN`,
  #   byte by byte (tabs stay: they separate columns), so nothing read from a file or a path can
  #   move the cursor or retitle the terminal: `/tmp/caf\xE9/lib`;
  # - in JSON, valid UTF-8 is written as is, and each byte that is not as the escape of the lone
  #   surrogate U+DC80..U+DCFF (`"/tmp/caf\udce9/lib"`), as Python's `surrogateescape` does: the
  #   document stays JSON, no UTF-8 name reads the same, and the bytes can be had back
  #   (`os.fsencode(json.loads(doc))` in Python).
  module Output
    # C0 controls but the tab, DEL and C1 controls.
    CONTROL = /[\x00-\x08\x0a-\x1f\x7f\u0080-\u009f]/

    module_function

    # `value` with every String in it (Hash keys too) taken as UTF-8 bytes.
    def utf8(value)
      case value
      when String then value.encoding == Encoding::UTF_8 ? value : value.dup.force_encoding(Encoding::UTF_8)
      when Array then value.map { |v| utf8(v) }
      when Hash then value.to_h { |k, v| [utf8(k), utf8(v)] }
      else value
      end
    end

    # One line of text, safe for a terminal.
    def text(line)
      line = utf8(line.to_s)
      return line if line.valid_encoding? && !line.match?(CONTROL)

      line.each_char.map { |c| c.valid_encoding? && !c.match?(CONTROL) ? c : escape_bytes(c, "\\x%02X") }.join
    end

    # A JSON document (pretty) for `data`, whatever bytes its strings hold.
    def json(data)
      require "json"
      JSON.pretty_generate(json_safe(utf8(data)))
    end

    def json_safe(value)
      case value
      when String then value.valid_encoding? ? value : Bytes.new(value)
      when Array then value.map { |v| json_safe(v) }
      when Hash then value.to_h { |k, v| [k.is_a?(String) ? k.scrub : k, json_safe(v)] }
      else value
      end
    end

    def escape_bytes(char, format) = char.bytes.map { |b| format(format, b) }.join

    # A string that is not valid UTF-8, as JSON: each stray byte as `\udcNN`.
    class Bytes
      def initialize(string)
        @string = string
      end

      def to_json(*)
        body = @string.each_char.map { |c| c.valid_encoding? ? JSON.generate(c)[1..-2] : Output.escape_bytes(c, "\\udc%02x") }
        "\"#{body.join}\""
      end
    end
  end
end
