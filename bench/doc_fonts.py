"""The corpus's fonts: DejaVu TrueType files found in the system's font folders, registered with reportlab by family and weight.

They are looked up by file name, not by a fixed path: Debian keeps them in
/usr/share/fonts/truetype/dejavu (fonts-dejavu-core), other systems
elsewhere under their font folders.
"""

from __future__ import annotations

import functools
import os
from enum import StrEnum
from pathlib import Path

# Where fontconfig looks on Linux (and macOS's two), in its order.
FONT_DIRS = (
    Path("/usr/share/fonts"),
    Path("/usr/local/share/fonts"),
    Path.home() / ".fonts",
    Path("/Library/Fonts"),
    Path("/System/Library/Fonts"),
)
INSTALL_HINT = "the DejaVu fonts (Debian: apt-get install fonts-dejavu-core)"


class Family(StrEnum):
    """The corpus's type families, each the stem of its regular file (the bold is ``<stem>-Bold.ttf``)."""

    SANS = "DejaVuSans"
    SERIF = "DejaVuSerif"
    CONDENSED = "DejaVuSansCondensed"


class FontMissing(Exception):
    """A DejaVu file the corpus draws with is in no font folder."""


@functools.cache
def font_file(name: str) -> Path:
    """The path of the font file ``name`` (e.g. ``DejaVuSans.ttf``) in the first font folder that has it."""
    for folder in FONT_DIRS:
        if not folder.is_dir():
            continue
        for root, _dirs, files in os.walk(folder):
            if name in files:
                return Path(root) / name
    raise FontMissing(f"{name} is in none of {', '.join(map(str, FONT_DIRS))}: install {INSTALL_HINT}")


@functools.cache
def registered(family: Family, bold: bool = False) -> str:
    """The reportlab name of ``family`` (bold or regular), registered (and embedded as a subset when drawn) on first use."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    name = f"{family}-Bold" if bold else str(family)
    pdfmetrics.registerFont(TTFont(name, str(font_file(f"{name}.ttf"))))
    return name


def width(text: str, font: str, size: float) -> float:
    """The advance width of ``text`` in points, in a registered font."""
    from reportlab.pdfbase import pdfmetrics

    return pdfmetrics.stringWidth(text, font, size)
