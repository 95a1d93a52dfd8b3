# frozen_string_literal: true

module Loadscan
  class Profile
    # The profile as one self-contained page (page.html beside this file: its style and script
    # inline, nothing fetched): an icicle of the require tree to click into, the entries and gems
    # by self time, a search by gem. The profile is in the page as the speedscope JSON
    # (Profile::Speedscope), which the page's script reads as Tree.from_speedscope does.
    module HTML
      TEMPLATE = File.join(__dir__, "page.html")

      module_function

      def render(tree)
        require_relative "speedscope"
        page(Speedscope.render(tree), tree.name)
      end

      # The page of `json`, a profile as Speedscope.render writes it, named `name`.
      def page(json, name)
        # In a script element, "</" could end it early; "<!--" start a comment.
        data = json.gsub("</", "<\\/").gsub("<!--", "\\u003c!--")
        title = "loadscan boot profile: #{name}".gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
        File.read(TEMPLATE).sub("{{TITLE}}") { title }.sub("{{DATA}}") { data }
      end
    end
  end
end
