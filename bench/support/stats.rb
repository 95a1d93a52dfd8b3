# frozen_string_literal: true

module Bench
  # Statistics for paired, alternating runs. Stdlib only.
  #
  # Ratios (variant / baseline) use a t-interval on the log ratios of PAIRED runs: in round i
  # both variants ran back to back, so d_i = ln(variant_i / baseline_i) cancels most of the
  # machine's drift; exp(mean(d) ± t(0.995, n-1) · sd(d)/√n) is the 99% CI of the geometric-mean
  # ratio. The gate's ratio of overheads ((L−O)/(B−O)) has no such closed form: it uses a
  # percentile bootstrap over the paired rounds (fixed seed, 10 000 resamples).
  module Stats
    module_function

    # two-sided 99% critical values of Student's t, by degrees of freedom
    T995 = [nil, 63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
            3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
            2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750].freeze

    def t995(df)
      return Float::INFINITY if df < 1
      return T995[df] if df < T995.size
      return 2.704 if df <= 40
      return 2.660 if df <= 60
      return 2.617 if df <= 120

      2.576
    end

    def median(xs)
      s = xs.sort
      n = s.size
      return nil if n.zero?

      n.odd? ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0
    end

    def mean(xs) = xs.sum / xs.size.to_f

    def sd(xs)
      return 0.0 if xs.size < 2

      m = mean(xs)
      Math.sqrt(xs.sum { |x| (x - m)**2 } / (xs.size - 1))
    end

    # Paired ratio a/b: {ratio:, lo:, hi:, n:} (geometric mean of a_i/b_i with 99% t-interval).
    def paired_ratio(a, b)
      n = [a.size, b.size].min
      return nil if n < 2

      d = (0...n).map { |i| Math.log(a[i] / b[i]) }
      m = mean(d)
      h = t995(n - 1) * sd(d) / Math.sqrt(n)
      { ratio: Math.exp(m), lo: Math.exp(m - h), hi: Math.exp(m + h), n: n }
    end

    # Ratio of overheads over a floor: (x − floor) / (ref − floor), per round paired.
    # Point estimate: mean(x−floor)/mean(ref−floor); 99% CI: percentile bootstrap over rounds.
    def overhead_ratio(x, ref, floor, resamples: 10_000, seed: 12_345)
      n = [x.size, ref.size, floor.size].min
      dx = (0...n).map { |i| x[i] - floor[i] }
      dr = (0...n).map { |i| ref[i] - floor[i] }
      stat = ->(idx) { idx.sum { |i| dx[i] } / idx.sum { |i| dr[i] }.to_f }
      point = stat.(0...n)
      rng = Random.new(seed)
      boots = Array.new(resamples) { stat.(Array.new(n) { rng.rand(n) }) }.sort
      { ratio: point, lo: boots[(0.005 * resamples).floor], hi: boots[(0.995 * resamples).ceil - 1], n: n,
        overhead_ms: mean(dx) * 1000, ref_overhead_ms: mean(dr) * 1000 }
    end
  end
end
