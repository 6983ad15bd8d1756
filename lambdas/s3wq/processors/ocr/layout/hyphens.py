"""Lines of a paragraph joined into its text, a word broken over a line end ("docu-" + "ment") made whole again."""

from __future__ import annotations

from collections.abc import Iterable

# A letter, then a hyphen that ends the line: the typesetter broke the word there when the next line goes on
# in lower case ("docu-" "ment"); before a capital or a digit the hyphen is the word's own ("Jean-" "Paul",
# "COVID-" "19") and stays, with no space after it. A soft hyphen is a break and nothing else, always dropped.
_HYPHENS = "-\u2010"  # hyphen-minus and the hyphen a text layer may carry
_SOFT_HYPHEN = "\u00ad"


def join_lines(texts: Iterable[str]) -> str:
    """The lines' texts joined with a space, but where a word was broken over a line end."""
    joined = ""
    for text in texts:
        if not text:
            continue
        if not joined:
            joined = text
        elif joined[-1] == _SOFT_HYPHEN:
            joined = joined[:-1] + text
        elif joined[-1] in _HYPHENS and len(joined) > 1 and joined[-2].isalpha():
            joined = (joined[:-1] if text[0].islower() else joined) + text
        else:
            joined += " " + text
    return joined
