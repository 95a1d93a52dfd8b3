# frozen_string_literal: true
# Records, during a stock boot, which file every `require`d feature resolves to
# ($LOAD_PATH.resolve_feature_path at the moment of the require), and at exit writes the map
# feature => absolute path to BENCH_ORACLE_OUT (Marshal) for bench/preludes/oracle.rb.
$bench_oracle_record = {}
module Kernel
  module_function

  alias_method :bench_record_original_require, :require
  class << self
    alias_method :bench_record_original_require, :require
  end

  def require(feature)
    if feature.is_a?(String) && !$bench_oracle_record.key?(feature)
      r = begin
        $LOAD_PATH.resolve_feature_path(feature)
      rescue StandardError, LoadError
        nil
      end
      $bench_oracle_record[feature] = r[1] if r && r[1].is_a?(String) && File.file?(r[1])
    end
    bench_record_original_require(feature)
  end
end
at_exit { File.binwrite(ENV.fetch("BENCH_ORACLE_OUT"), Marshal.dump($bench_oracle_record)) }
