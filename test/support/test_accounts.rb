# frozen_string_literal: true

require_relative "ruby_process"
require "etc"

module Loadscan
  module TestSupport
    # Test accounts as Debian, Ubuntu and Fedora make users (`useradd --user-group`: a private
    # group each), made once, idempotently (the core's cache_dir test makes the same ones), and
    # processes run as them with `setpriv`, their groups and umask 002. Needs root.
    module TestAccounts
      SOLO = "loadscan-solo" # and its private group
      TEAM = "loadscan-team" # shared by loadscan-mate1 and loadscan-mate2

      def ensure_accounts
        system("groupadd", "-f", TEAM, exception: true)
        [[SOLO, nil], ["loadscan-mate1", TEAM], ["loadscan-mate2", TEAM]].each do |user, group|
          next if system("id", "-u", user, out: File::NULL, err: File::NULL)

          system("useradd", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", *(["--groups", group] if group),
                 user, exception: true)
        end
      end

      # Runs `argv` as SOLO, with its groups and umask 002 (run_ruby!: it must succeed); returns its Result.
      def as_solo(*argv, chdir:, env: {})
        run_ruby!(command: ["setpriv", "--reuid=#{SOLO}", "--regid=#{SOLO}", "--init-groups", "sh", "-c", 'umask 002 && exec "$@"', "sh", *argv],
                  env: { "HOME" => chdir, "LOADSCAN_CACHE_DIR" => nil }.merge(env), chdir: chdir)
      end
    end
  end
end
