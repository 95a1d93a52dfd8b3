# frozen_string_literal: true

module Loadscan
  module TestSupport
    # For the compile cache's tests: code the child processes run to put an instruction sequence
    # in a form to compare (`disasm` and `to_a`). Ruby 3.1 and 3.3 dump a hidden local (the
    # keyword bits of `def m(a, k: nil)`) under a name of its own ("#arg_rest") that a fresh
    # compile shows as a number; nothing else reads that name (`local_variables` leaves it out;
    # `disasm` is the same), so `to_a`'s hidden locals are compared as one placeholder.
    module Iseqs
      PLAIN = <<~RUBY
        module LoadscanIseqs
          HIDDEN = :"(hidden)"

          def self.plain(a)
            return a unless a.is_a?(Array)

            a = a.map { |x| plain(x) }
            if a[0] == "YARVInstructionSequence/SimpleDataFormat" && a[10].is_a?(Array)
              a[10] = a[10].map { |l| l.is_a?(Integer) || (l.is_a?(Symbol) && l.start_with?("#")) ? HIDDEN : l }
            end
            a
          end
        end
      RUBY

      module_function

      # The paths whose `served` instruction sequence is not Ruby's compile (`stock`; `again`, a
      # second stock process): equal, or — where Ruby's own compiles of a file differ between two
      # processes (3.3 leaves a node id uninitialized in a few) — equal but for node ids.
      def differ(served, stock, again)
        served.keys.reject do |path|
          served[path] == stock[path] || (stock[path] != again[path] && without_node_ids(served[path]) == without_node_ids(stock[path]))
        end
      end

      def without_node_ids(x)
        case x
        when Array then x.map { |y| without_node_ids(y) }
        when Hash then x.except(:node_ids).transform_values { |y| without_node_ids(y) }
        else x
        end
      end
    end
  end
end
