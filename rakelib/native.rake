# frozen_string_literal: true

require_relative "native_gem"

desc "Build the precompiled gems into pkg/: x86_64-linux-gnu (Rubies #{NativeGem::RUBIES.join(", ")}) and aarch64-linux-gnu"
task native: %w[native:x86_64 native:aarch64]

namespace :native do
  desc "Build pkg/loadscan-*-x86_64-linux-gnu.gem: `rake compile` with each Ruby of the matrix, then package"
  task :x86_64 do
    NativeGem.package("x86_64-linux-gnu", NativeGem.host_builds, strip: "strip")
  end

  desc "Build pkg/loadscan-*-aarch64-linux-gnu.gem: cross-built against each aarch64 Ruby (run under qemu-user)"
  task :aarch64 do
    NativeGem.package("aarch64-linux-gnu", NativeGem.aarch64_builds, strip: "aarch64-linux-gnu-strip")
  end
end
