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
      # second stock process): equal, or equal but for node ids that Ruby's own compiles do not
      # fix: Ruby 3.3 leaves the node id of an instruction that follows a node-less one (id -1)
      # uninitialized in a few iseqs (two stock processes of resolv.rb disagree there).
      def differ(served, stock, again)
        served.keys.reject do |path|
          served[path] == stock[path] || (stock[path] != again[path] && same_but_node_ids(served[path], stock[path])) ||
            same_but_node_ids(served[path], stock[path], after_gap: true)
        end
      end

      def same_but_node_ids(a, b, after_gap: false)
        case a
        when Array then b.is_a?(Array) && a.size == b.size && a.zip(b).all? { |x, y| same_but_node_ids(x, y, after_gap: after_gap) }
        when Hash
          return false unless b.is_a?(Hash) && a.keys == b.keys

          a.all? do |k, v|
            if k == :node_ids then !after_gap || node_ids_agree(v, b[k])
            else same_but_node_ids(v, b[k], after_gap: after_gap)
            end
          end
        else a == b
        end
      end

      def node_ids_agree(a, b)
        a.is_a?(Array) && b.is_a?(Array) && a.size == b.size && a.each_index.all? { |i| a[i] == b[i] || (i.positive? && b[i - 1] == -1) }
      end
    end
  end
end
