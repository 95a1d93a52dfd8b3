# frozen_string_literal: true

module Loadscan
  class Profile
    # The profile as one self-contained page (page.html beside this file: its style and script
    # inline, nothing fetched): an icicle of the require tree to click into, the entries and gems
    # by self time, a search by gem. The profile is in the page as the speedscope JSON
    # (Profile::Speedscope), which the page's script reads as Tree.from_speedscope does.
    module HTML
      TEMPLATE = File.join(__dir__, "page.html")
      # The template's holes, filled in one pass: what fills one is never read for another.
      HOLE = /\{\{(?:TITLE|DATA)\}\}/

      module_function

      def render(tree)
        require_relative "speedscope"
        page(Speedscope.render(tree), tree.name)
      end

      # The page of `json`, a profile as Speedscope.render writes it, named `name`: UTF-8,
      # whatever the locale (bytes of either that are not UTF-8 become U+FFFD).
      def page(json, name)
        # In a script element, "</" could end it early; "<!--" start a comment.
        data = utf8(json).gsub("</", "<\\/").gsub("<!--", "\\u003c!--")
        title = utf8("loadscan boot profile: #{utf8(name)}").gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
        holes = { "{{TITLE}}" => title, "{{DATA}}" => data }
        File.read(TEMPLATE, mode: "rb", encoding: Encoding::UTF_8).gsub(HOLE) { holes.fetch(Regexp.last_match(0)) }
      end

      def utf8(text)
        text = text.to_s
        text = text.dup.force_encoding(Encoding::UTF_8) unless text.encoding == Encoding::UTF_8
        text.valid_encoding? ? text : text.scrub
      end
    end
  end
end
