"""What a line's first words say it is: a list item's marker ("•", "-", "1.", "a)", "(iv)"), a caption's label ("Figure 3:")."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Glyph bullets may touch the text; a dash or an asterisk is a bullet only before a space ("-3" is a number).
_GLYPHS = "•◦▪▫‣\u2043●○■□►▸✓"  # \u2043: the hyphen bullet
_DASHES = "-\u2013\u2014*·"  # hyphen-minus, en and em dashes, asterisk, middle dot
_BULLET = re.compile(rf"^(?:([{_GLYPHS}])\s*|([{re.escape(_DASHES)}])\s+)(?=\S)")
# "12." "3)" "b." "c)" "B)" "(iv)" "(a)" "iv." before a space. A capital with a full stop ("A. Smith") is an initial.
_ROMAN = r"(?:[ivxlc]{1,6})"
_NUMBERED = re.compile(rf"^(?:(\d{{1,3}})[.)]|[a-z][.)]|[A-Z]\)|\((?:\d{{1,3}}|[a-zA-Z]|{_ROMAN})\)|{_ROMAN}[.)])\s+(?=\S)")
# "Figure 3", "Fig. 2b:", "Table 4.1.", "TABLE II —": a caption's label, then a stop, a colon or a dash, or nothing.
_LABEL = r"(?:Figure|FIGURE|Fig\.|FIG\.|Table|TABLE|Tab\.|Chart|Plate|Exhibit|Scheme|Map|Photo)"
_NUMBER = r"(?:\d+[a-z]?(?:[.-]\d+)*|[IVXLC]+)"
_CAPTION = re.compile(rf"^{_LABEL}\s*{_NUMBER}\s*(?:[:.|\u2013\u2014-]|$)")
_CAPTION_LOOSE = re.compile(rf"^{_LABEL}\s*{_NUMBER}\b")


@dataclass(frozen=True)
class ListMarker:
    """A list item's marker as printed, its number when it counts in digits, and the item's text after it."""

    marker: str
    number: int | None
    rest: str

    @property
    def bullet(self) -> bool:
        """A bullet, not a count ("•", "-"; "a)" and "(iv)" count, in letters)."""
        return self.marker[0] in _GLYPHS or self.marker[0] in _DASHES


def list_marker(text: str) -> ListMarker | None:
    """The list marker ``text`` starts with, if any."""
    if match := _BULLET.match(text):
        return ListMarker(match.group(1) or match.group(2), None, text[match.end() :])
    if match := _NUMBERED.match(text):
        number = int(match.group(1)) if match.group(1) else None
        return ListMarker(match.group(0).strip(), number, text[match.end() :])
    return None


def is_caption(text: str, *, beside_figure: bool) -> bool:
    """Whether ``text`` starts a caption: "Figure 3:" anywhere; "Figure 3 Results" only beside a figure or a table."""
    return bool(_CAPTION.match(text) or (beside_figure and _CAPTION_LOOSE.match(text)))
