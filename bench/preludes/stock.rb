# frozen_string_literal: true
# Stock Ruby: nothing. (The `stock` variant runs with no BOOT_PRELUDE at all; this file only
# exists so every variant has a prelude to name.)
