# frozen_string_literal: true
# loadscan, as config/boot.rb would have it (`require "loadscan/setup"`), loaded by absolute
# path from this checkout. Its cache dir comes from LOADSCAN_CACHE_DIR (set by the bench).
load File.expand_path("../../lib/loadscan/setup.rb", __dir__)
