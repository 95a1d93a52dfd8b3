#!/usr/bin/env ruby
# frozen_string_literal: true
# Draws boot time against gem count from tmp/bench/boot.json (bench/boot.rb) as an SVG:
#
#   ruby bench/chart.rb [STATE] [OUT.svg] [BOOT.json…]
#
# (defaults: warm, bench/boot-chart.svg, tmp/bench/boot.json; several JSON files are merged, so
# runs of different gem counts can share one chart)
#
# One line per variant (median ms of each fixture size), no dependency beyond the stdlib.
require "json"

state = ARGV[0] || "warm"
out = ARGV[1] || File.join(__dir__, "boot-chart.svg")
inputs = ARGV[2..].to_a
inputs = [File.expand_path("../tmp/bench/boot.json", __dir__)] if inputs.empty?
rows = inputs.flat_map { |f| JSON.parse(File.read(f))["results"] }
             .select { |r| r["state"] == state && r["fixture"].start_with?("gems-") }
abort "chart: no #{state} rows for gems-N fixtures in #{inputs.join(", ")}" if rows.empty?

series = rows.group_by { |r| r["variant"] }.transform_values do |rs|
  rs.map { |r| [r["fixture"][/\d+/].to_i, r["median_ms"]] }.sort
end
colors = { "stock" => "#c0392b", "bootsnap" => "#2980b9", "loadscan" => "#27ae60", "recorded" => "#7f8c8d", "recorded_rubygems" => "#b7950b" }
w, h, left, bottom, top, right = 640, 400, 60, 50, 30, 130
xs = series.values.flatten(1).map(&:first).uniq.sort
ymax = series.values.flatten(1).map(&:last).max * 1.1
x = ->(g) { left + (g - xs.first).to_f / [xs.last - xs.first, 1].max * (w - left - right) }
y = ->(ms) { h - bottom - ms / ymax * (h - top - bottom) }

svg = +%(<svg xmlns="http://www.w3.org/2000/svg" width="#{w}" height="#{h}" font-family="sans-serif" font-size="12">\n)
svg << %(<rect width="#{w}" height="#{h}" fill="white"/>\n)
svg << %(<text x="#{left}" y="18" font-size="14">Boot time (median ms, #{state} cache) against gem count</text>\n)
svg << %(<line x1="#{left}" y1="#{h - bottom}" x2="#{w - right}" y2="#{h - bottom}" stroke="black"/>\n)
svg << %(<line x1="#{left}" y1="#{top}" x2="#{left}" y2="#{h - bottom}" stroke="black"/>\n)
5.times do |i|
  ms = ymax / 5 * (i + 1)
  svg << %(<text x="#{left - 6}" y="#{y.(ms) + 4}" text-anchor="end">#{ms.round}</text>\n)
  svg << %(<line x1="#{left}" y1="#{y.(ms)}" x2="#{w - right}" y2="#{y.(ms)}" stroke="#eee"/>\n)
end
xs.each { |g| svg << %(<text x="#{x.(g)}" y="#{h - bottom + 16}" text-anchor="middle">#{g}</text>\n) }
svg << %(<text x="#{(left + w - right) / 2}" y="#{h - 12}" text-anchor="middle">gem lib dirs on $LOAD_PATH</text>\n)
series.each_with_index do |(variant, points), i|
  color = colors.fetch(variant, "black")
  svg << %(<polyline fill="none" stroke="#{color}" stroke-width="2" points="#{points.map { |g, ms| "#{x.(g).round(1)},#{y.(ms).round(1)}" }.join(" ")}"/>\n)
  points.each { |g, ms| svg << %(<circle cx="#{x.(g).round(1)}" cy="#{y.(ms).round(1)}" r="3" fill="#{color}"/>\n) }
  svg << %(<text x="#{w - right + 10}" y="#{top + 20 + i * 18}" fill="#{color}">#{variant}</text>\n)
end
svg << "</svg>\n"
File.write(out, svg)
puts "chart: wrote #{out}"
