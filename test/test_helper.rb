# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require "fileutils"
require "rbconfig"

require_relative "support/paths"
require_relative "support/file_tree"
require_relative "support/ruby_process"
require_relative "support/assertions"
require_relative "support/native_ext"
require_relative "support/boot_fixture"
require_relative "support/in_fork"
require_relative "support/guard"

class Minitest::Test
  include Loadscan::TestSupport::FileTree
  include Loadscan::TestSupport::RubyProcess
  include Loadscan::TestSupport::Assertions
  include Loadscan::TestSupport::NativeExt
  include Loadscan::TestSupport::BootFixture
  include Loadscan::TestSupport::InFork
  prepend Loadscan::TestSupport::Guard
end
