# frozen_string_literal: true

module Loadscan
  module TestSupport
    module RailsApp
      # What the Rails test app holds besides what `rails new` generated: a model with its
      # table, a controller, their tests (run in 2 forked workers), a probe of the process that
      # answers (WorkerProbe: its pid and parent's, and what a require it makes then does),
      # routed at /probe for the server test, and Puma in cluster mode with the app preloaded.
      module Files
        # Loaded by neither the app's boot, nor its tests, nor the server (which loads rack/lint in
        # development): a worker's require of it is its first.
        PROBE_FEATURE = "thor/shell/html"

        ADDED = {
          "db/migrate/20260101000000_create_widgets.rb" => <<~RUBY,
            class CreateWidgets < ActiveRecord::Migration[SERIES]
              def change
                create_table :widgets do |t|
                  t.string :name, null: false
                  t.timestamps
                end
              end
            end
          RUBY
          "app/models/widget.rb" => <<~RUBY,
            class Widget < ApplicationRecord
              validates :name, presence: true
            end
          RUBY
          "app/controllers/widgets_controller.rb" => <<~RUBY,
            class WidgetsController < ApplicationController
              def index
                render plain: Widget.order(:name).pluck(:name).join("\\n")
              end

              def create
                render plain: Widget.create!(name: params.require(:name)).name, status: :created
              end
            end
          RUBY
          # Not an ApplicationController: Rails 7.2's allow_browser turns away Net::HTTP's user agent.
          "app/controllers/probe_controller.rb" => <<~RUBY,
            class ProbeController < ActionController::Base
              def show
                sleep(Float(params[:sleep])) if params[:sleep]
                render json: WorkerProbe.call
              end
            end
          RUBY
          "lib/worker_probe.rb" => <<~RUBY,
            # The process that runs this, how many times it has (a forked worker counts from 1), and
            # what its require of #{PROBE_FEATURE} does (loadscan's hits before and after it when
            # loadscan is set up).
            module WorkerProbe
              @calls = Hash.new(0)

              def self.call
                hits = -> { Loadscan.stats[:hits] if defined?(Loadscan.active?) && Loadscan.active? }
                before = hits.call
                required = require(#{PROBE_FEATURE.inspect})
                { "pid" => Process.pid, "ppid" => Process.ppid, "call" => @calls[Process.pid] += 1,
                  "required" => required, "hits" => [before, hits.call],
                  "engaged" => defined?(Loadscan.engaged?) ? Loadscan.engaged? : nil, "loaded_features" => $LOADED_FEATURES.dup }
              end
            end
          RUBY
          "config/routes.rb" => <<~RUBY,
            Rails.application.routes.draw do
              resources :widgets, only: %i[index create]
              get "probe" => "probe#show"
              get "up" => "rails/health#show", as: :rails_health_check
            end
          RUBY
          # Two workers forked from a master that loaded the app; one thread each, so a worker
          # busy with a request takes no other one; on 127.0.0.1 only. At a SIGTERM to the master,
          # about one stop in five leaves a worker waiting (a futex, in its main thread), stock or
          # not, until the master kills it after worker_shutdown_timeout (30 s by default).
          "config/puma.rb" => <<~RUBY,
            workers 2
            preload_app!
            threads 1, 1
            worker_shutdown_timeout 3
            bind "tcp://127.0.0.1:\#{Integer(ENV.fetch("PORT"))}"
          RUBY
          "test/fixtures/widgets.yml" => <<~YAML,
            anvil:
              name: Anvil
            bolt:
              name: Bolt
          YAML
          "test/models/widget_test.rb" => <<~RUBY,
            require "test_helper"

            class WidgetTest < ActiveSupport::TestCase
              test "a widget needs a name" do
                assert_not Widget.new.valid?
                assert Widget.new(name: "Cog").valid?
              end

              test "the fixtures are in the table" do
                assert_equal %w[Anvil Bolt], Widget.order(:name).pluck(:name)
              end
            end
          RUBY
          "test/controllers/widgets_controller_test.rb" => <<~RUBY,
            require "test_helper"

            class WidgetsControllerTest < ActionDispatch::IntegrationTest
              test "index lists the widgets" do
                get widgets_url
                assert_response :success
                assert_equal "Anvil\\nBolt", response.body
              end

              test "create adds one" do
                assert_difference("Widget.count", 1) { post widgets_url, params: { name: "Cog" } }
                assert_response :created
              end
            end
          RUBY
        }.freeze

        # The generated test_helper.rb's line, and what replaces it: 2 workers whatever the number
        # of tests (Rails 7 runs fewer than 50 in one process; 6.1 has no threshold), each
        # recording WorkerProbe into LOADSCAN_TEST_WORKERS once forked.
        PARALLELIZE = "parallelize(workers: :number_of_processors)\n"
        PARALLELIZE_2 = <<~RUBY
          parallelize(workers: 2THRESHOLD)
              parallelize_setup do |worker|
                dir = ENV["LOADSCAN_TEST_WORKERS"]
                File.binwrite(File.join(dir, "worker-\#{worker}"), Marshal.dump(WorkerProbe.call)) if dir
              end
        RUBY

        module_function

        # Where WorkerProbe goes: lib/, which Rails 7.1 and later autoload and eager load
        # (`config.autoload_lib` in the generated config); on 6.1, app/lib/, as every directory of app/.
        def probe_path(series) = Gem::Version.new(series) >= Gem::Version.new("7.1") ? "lib/worker_probe.rb" : "app/lib/worker_probe.rb"

        # Writes them into the app of Rails `series` ("7.2", "6.1").
        def write(app, series)
          ADDED.each do |path, text|
            path = probe_path(series) if path == "lib/worker_probe.rb"
            FileUtils.mkdir_p(File.dirname(File.join(app, path)))
            File.write(File.join(app, path), text.sub("SERIES", series))
          end
          helper = File.join(app, "test", "test_helper.rb")
          text = File.read(helper)
          raise "#{helper} has no #{PARALLELIZE.strip}:\n#{text}" unless text.include?(PARALLELIZE)

          threshold = Gem::Version.new(series) >= Gem::Version.new("7.0") ? ", threshold: 0" : ""
          File.write(helper, text.sub(PARALLELIZE, PARALLELIZE_2.sub("THRESHOLD", threshold)))
        end
      end
    end
  end
end
