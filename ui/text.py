"""Text from a file, a URL or an error message, shown in Streamlit's Markdown elements as the text it is."""

import re

# What Markdown, GFM and Streamlit act on in a line of text: backslash, code, emphasis, links and images,
# HTML and autolinks, headings, strikethrough, math, directives (:red[...], :material/...:), entities; an
# underscore only where it can open or close emphasis (not inside a word: prec_max stays as it is).
MARKUP = re.compile(r"[\\`*\[\]<>#~$:&]|(?<![^\W_])_|_(?![^\W_])")
LEADING = re.compile(r"^([+-]|\d+[.)])")  # a list item or a thematic break where the text starts
# What is found in the text after the escapes are undone: GFM links bare addresses (http://, https://, www.,
# a@b.c), Streamlit draws :material_x: and :streamlit: as icons and writes -> as →, -- as — (and <-, <->, >=,
# <=, ~=): an invisible word joiner breaks each pattern.
BARE = re.compile(r"(?i)(?<=http)(?=s?:)|(?<=www)(?=\.)|(?<=@)|(?<=:)(?=material|streamlit)|(?<=[<>~-])(?=[->=])")
WORD_JOINER = "\u2060"


def as_text(value: object) -> str:
    """A string for st.error, st.warning, st.caption and other elements that render Markdown, shown there as
    the text it is: a name or value from a file or a URL cannot become a link, an image or markup. Runs of
    white space become one space, as the page would show them (so no line can start a block)."""
    text = BARE.sub(WORD_JOINER, " ".join(str(value).split()))
    text = MARKUP.sub(lambda m: "\\" + m.group(), text)
    return LEADING.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], text)
