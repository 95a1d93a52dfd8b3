# frozen_string_literal: true

module Loadscan
  # Prepended to Kernel's singleton class (once, by the first `listen`): hears of every method
  # (re)defined in Kernel or on Kernel itself, and passes the news on to each listener, as
  # `listener.call(owner, name)` with `owner` Kernel or Kernel's singleton class. Listeners:
  # CoreExt (loadscan's decorator in place of each new binding of Ruby's C require) and the boot
  # profile's hooks (put back in front of a new `require`).
  module KernelWatch
    LISTENERS = []

    def self.listen(listener)
      Kernel.singleton_class.prepend(self) unless Kernel.singleton_class.include?(self)
      LISTENERS << listener
    end

    private

    def method_added(name)
      super
      LISTENERS.each { |listener| listener.call(Kernel, name) }
    end

    def singleton_method_added(name)
      super
      LISTENERS.each { |listener| listener.call(Kernel.singleton_class, name) }
    end
  end
end
