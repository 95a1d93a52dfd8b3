# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require "fileutils"
require "rbconfig"

require_relative "support/paths"
require_relative "support/file_tree"
require_relative "support/ruby_process"
require_relative "support/assertions"
require_relative "support/require_script"
require_relative "support/native_ext"
require_relative "support/gc_deferral"
require_relative "support/boot_fixture"
require_relative "support/in_fork"
require_relative "support/guard"
require_relative "support/file_times"

# A CI runner sets CI=true, which makes loadscan validate its cache by listing (Config): the
# suite's processes validate by mtime as on a developer's machine, unless a test sets CI itself.
ENV.delete("CI")

class Minitest::Test
  include Loadscan::TestSupport::FileTree
  include Loadscan::TestSupport::RubyProcess
  include Loadscan::TestSupport::Assertions
  include Loadscan::TestSupport::RequireScript
  include Loadscan::TestSupport::NativeExt
  include Loadscan::TestSupport::BootFixture
  include Loadscan::TestSupport::InFork
  prepend Loadscan::TestSupport::Guard
end
