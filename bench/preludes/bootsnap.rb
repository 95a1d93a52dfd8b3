# frozen_string_literal: true
# Bootsnap with ONLY its load-path cache: no compile caches. Cache dir from BENCH_BOOTSNAP_DIR.
# Bootsnap 1.26.1 (Debian sid's, on Ruby 3.3.8: fixtures/bundle.rb puts it on the fixture's GEM_PATH):
#   setup(cache_dir:, development_mode: true, load_path_cache: true, ignore_directories: nil,
#         readonly: false, revalidation: false, compile_cache_iseq: true, compile_cache_yaml: true,
#         compile_cache_json: (deprecated since 1.19, warns), config_path: nil)
# Bootsnap 1.13 (Debian's ruby-bootsnap, Ruby 3.1) also has compile_cache_json (default true).
# The Debian fixture removes vendor_ruby from $LOAD_PATH but ships ruby-bootsnap as one of its
# package dirs, so a plain `require "bootsnap"` works on every fixture.
require "bootsnap"
json = Gem::Version.new(Bootsnap::VERSION) < Gem::Version.new("1.19") ? { compile_cache_json: false } : {}
Bootsnap.setup(
  cache_dir: ENV.fetch("BENCH_BOOTSNAP_DIR"),
  development_mode: false,
  load_path_cache: true,
  compile_cache_iseq: false,
  compile_cache_yaml: false,
  **json,
)
