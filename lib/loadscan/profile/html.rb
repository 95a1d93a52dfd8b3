# frozen_string_literal: true

require "json"

module Loadscan
  class Profile
    # The profile as one self-contained page (page.html beside this file: its style and script
    # inline, nothing fetched): an icicle of the require tree to click into, the entries and gems
    # by self time, a search by gem. The profile's figures are in the page as JSON.
    module HTML
      TEMPLATE = File.join(__dir__, "page.html")

      module_function

      def render(tree)
        # In a script element, "</" could end it early; "<!--" start a comment.
        data = JSON.generate(tree.to_h).gsub("</", "<\\/").gsub("<!--", "\\u003c!--")
        title = "loadscan boot profile: #{tree.name}".gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
        File.read(TEMPLATE).sub("{{TITLE}}") { title }.sub("{{DATA}}") { data }
      end
    end
  end
end
