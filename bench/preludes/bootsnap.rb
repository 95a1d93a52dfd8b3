# frozen_string_literal: true
# Bootsnap 1.13 (Debian's ruby-bootsnap) with ONLY its load-path cache: no compile caches.
# Cache dir from BENCH_BOOTSNAP_DIR. Signature checked in /usr/lib/ruby/vendor_ruby/bootsnap.rb:
#   setup(cache_dir:, development_mode: true, load_path_cache: true, autoload_paths_cache: nil,
#         disable_trace: nil, compile_cache_iseq: true, compile_cache_yaml: true, compile_cache_json: true)
# The Debian fixture removes vendor_ruby from $LOAD_PATH but ships ruby-bootsnap as one of its
# package dirs, so a plain `require "bootsnap"` works on every fixture.
require "bootsnap"
Bootsnap.setup(
  cache_dir: ENV.fetch("BENCH_BOOTSNAP_DIR"),
  development_mode: false,
  load_path_cache: true,
  compile_cache_iseq: false,
  compile_cache_yaml: false,
  compile_cache_json: false,
)
