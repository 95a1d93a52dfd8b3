# frozen_string_literal: true

namespace :loadscan do
  desc "Delete loadscan's cache and its last boot's figures (the next boot rebuilds them)"
  task :clear do
    require_relative "../../loadscan"
    # This process set loadscan up (config/boot.rb): it must not write the cache back at exit.
    removed = Loadscan.clear_cache(Loadscan::Config.app_cache_dir)
    puts(removed.empty? ? "loadscan: nothing to remove" : removed.map { |path| "removed #{path}" })
  end
end

# `tmp:clear` empties tmp/cache, the default cache dir's parent; this also covers a cache dir
# set elsewhere with LOADSCAN_CACHE_DIR.
task "tmp:clear" => "loadscan:clear"
