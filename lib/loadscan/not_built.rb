# frozen_string_literal: true

module Loadscan
  # The source gem installed without its extension: extconf.rb found no Rust toolchain (cargo,
  # rustc 1.75+, a C compiler, libclang), so rather than failing `gem install` (and with it a
  # whole `bundle install`), it installs a note saying what was missing where the library would
  # be, `lib/loadscan/<ruby minor>/loadscan.not-built`. Native reads it when the library is
  # absent, and loadscan stays off with one warning naming the cause and the way out below.
  # Loaded by extconf.rb too, so both say the same.
  module NotBuilt
    # Beside where the library would be (lib/loadscan/native.rb).
    NOTE = "loadscan.not-built"
    # A note is one line; anything longer is cut.
    MAX_NOTE = 512

    # What to do about it.
    HOW = "to build it, install Rust 1.75 or newer (https://rustup.rs) and libclang (apt-get install libclang-dev, " \
          "dnf install clang-devel, apk add clang-dev), then run `gem pristine loadscan` (`bundle pristine loadscan` " \
          "under Bundler); or use a precompiled gem, which needs no Rust (x86_64 and aarch64 Linux with glibc: " \
          "README, \"Install\")"

    module_function

    # Why the extension was not built, from the note in `dir` (nil when there is none).
    def reason(dir)
      File.open(File.join(dir, NOTE), &:gets)&.[](0, MAX_NOTE)&.strip
    rescue SystemCallError, IOError
      nil
    end

    # The LoadError's message for a library left unbuilt for `reason`.
    def message(reason) = "#{what(reason)}; #{HOW}"

    # Loadscan.setup's one warning then.
    def warning(reason) = "#{what(reason)}: booting with Ruby's own require; #{HOW}"

    def what(reason) = "the source gem was installed without building its native extension (#{reason})"
  end
end
