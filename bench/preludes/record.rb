# frozen_string_literal: true
# Records, during a stock boot, which file every `require`d feature resolves to
# ($LOAD_PATH.resolve_feature_path at the moment of the require), and at exit writes the map
# feature => absolute path to BENCH_RECORDED_OUT (Marshal) for bench/preludes/recorded.rb.
$bench_recorded_map = {}
module Kernel
  module_function

  alias_method :bench_record_original_require, :require
  class << self
    alias_method :bench_record_original_require, :require
  end

  def require(feature)
    if feature.is_a?(String) && !$bench_recorded_map.key?(feature)
      r = begin
        $LOAD_PATH.resolve_feature_path(feature)
      rescue StandardError, LoadError
        nil
      end
      $bench_recorded_map[feature] = r[1] if r && r[1].is_a?(String) && File.file?(r[1])
    end
    bench_record_original_require(feature)
  end
end
at_exit { File.binwrite(ENV.fetch("BENCH_RECORDED_OUT"), Marshal.dump($bench_recorded_map)) }
