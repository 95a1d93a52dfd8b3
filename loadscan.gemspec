# frozen_string_literal: true

require_relative "lib/loadscan/version"

Gem::Specification.new do |spec|
  spec.name = "loadscan"
  spec.version = Loadscan::VERSION
  spec.summary = "A load-path cache for Ruby's require, with a Rust core: exact, fast, shareable"
  spec.description = <<~DESC
    loadscan scans every $LOAD_PATH directory once and resolves `require` from an index that
    follows Ruby's own precedence exactly, so boot time stops growing with the number of gems.
  DESC
  spec.authors = ["loadscan developers"]
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.1"
  # What the build and the library need: no tests, examples or benchmarks (Rust's included).
  spec.files = Dir["lib/**/*.rb", "lib/**/*.rake", "exe/*", "ext/*/src/**/*.rs", "ext/*/Cargo.toml", "ext/loadscan/extconf.rb",
                   "ext/loadscan/cargo_build.rb", "Cargo.toml", "Cargo.lock", "README.md", "CHANGELOG.md", "LICENSE"]
  spec.metadata = { "rubygems_mfa_required" => "true" }
  spec.bindir = "exe"
  spec.executables = Dir["exe/*"].map { |f| File.basename(f) }
  spec.extensions = ["ext/loadscan/extconf.rb"]
  spec.require_paths = ["lib"]
end
