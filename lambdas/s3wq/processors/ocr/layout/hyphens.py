"""Lines of a paragraph joined into its text, a word broken over a line end ("docu-" + "ment") made whole again."""

from __future__ import annotations

import re
from collections.abc import Iterable

# A letter, then a hyphen that ends the line: the typesetter broke the word there. The next line goes on
# with a lower-case letter when it is the word's rest ("docu-" "ment"); with a capital or a digit the hyphen
# is the word's own ("Jean-" "Paul", "COVID-" "19"), and it stays, with no space after it.
_BROKEN = re.compile(r"[^\W\d_]-$")
_HYPHENS = "-\u00ad\u2010"  # hyphen-minus, the soft hyphen and the hyphen a text layer may carry


def join_lines(texts: Iterable[str]) -> str:
    """The lines' texts joined with a space, but where a word was broken over a line end."""
    joined = ""
    for text in texts:
        if not text:
            continue
        if not joined:
            joined = text
        elif joined[-1] in _HYPHENS and _BROKEN.search(joined[:-1] + "-"):
            joined = (joined[:-1] if text[0].islower() else joined) + text
        else:
            joined += " " + text
    return joined
