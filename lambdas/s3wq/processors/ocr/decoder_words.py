"""A PDF page's text layer as words with boxes, from pdfium's characters: part of the decoder process (decoder.py).

Speed is the point of its shape. A ctypes call costs ~1.5 us here, and a
dense page has ~3,000 characters: a box, a font and an object asked for
each would take ~25 ms a page, half the text-layer path's whole budget. So
the page's text comes in one call (FPDFText_GetText), words are cut from it
at whitespace (pdfium puts a generated space where glyphs stand apart, and a
line break where the line changes), and only each word's first and last
characters are asked for their boxes and text object. A text object's
characters are consecutive in pdfium's list, so a word whose first character
belongs to the object of the next word's first belongs to it whole; a word
that spans objects (a superscript, a word set in fragments) is cut at each
object and its pieces joined again unless a gap of more than GAP_EM or a
change of line parts them. What is the same across an object (its font,
size, render mode) is asked once an object.

A split accent (a spacing diacritic drawn over a letter, as TeX sets it) is
joined to the letter its box overlaps most, here where the boxes are; the
spaces pdfium put around it go when the letters on either side stand closer
than GAP_EM. Ligature codepoints are spelt out.

Coordinates are points from the displayed page's top-left corner, y down
(PageSpace turns pdfium's PDF space, CropBox offset and /Rotate included).
"""

from __future__ import annotations

import ctypes
import math
import re
import struct
import unicodedata
from dataclasses import dataclass
from typing import Any

import pypdfium2.raw as pdfium_c

# Glyphs further apart than this share of the font size are two words (pdfium's generated spaces come near it).
GAP_EM = 0.2
# A split accent is joined to a letter whose box covers at least this share of the accent's width.
ACCENT_COVER = 0.3
# How many characters either side of an accent are looked at for its letter (spaces between them included).
ACCENT_REACH = 3
BOLD, INVISIBLE = 1, 2  # a word's flags on the wire
# Points go on the wire as whole hundredths (a fifth of a pixel at 1,200 dpi): JSON writes and reads integers at
# several times the speed of floats, and a float32 from pdfium reads as 17 digits.
HUNDREDTHS = 100
_INVISIBLE_MODES = {pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE, pdfium_c.FPDF_TEXTRENDERMODE_CLIP}
_FORCE_BOLD = 1 << 18  # PDF font flag 19
_BOLD_WEIGHT = 600
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold", re.IGNORECASE)
# Fonts OCR tools draw their hidden text layer in (Tesseract's GlyphLessFont, and the like).
_OCR_FONT_NAME = re.compile(r"glyphless|tesseract|invisible|ocrfont|hocr", re.IGNORECASE)
# A word: a run of characters that are not whitespace nor control characters (U+0002 is pdfium's hyphen at a line's end).
_WORD = re.compile(r"[^\s\x00\x01\x03-\x1f\ufffe\uffff]+")
# Spacing diacritics, and the combining marks, that a PDF may draw over a letter as a glyph of their own.
_SPACING_ACCENTS = {
    "\u00b4": "\u0301", "`": "\u0300", "\u00a8": "\u0308", "\u02c6": "\u0302", "^": "\u0302", "\u02dc": "\u0303",
    "~": "\u0303", "\u00b8": "\u0327", "\u02da": "\u030a", "\u02c7": "\u030c", "\u02d8": "\u0306", "\u02d9": "\u0307",
    "\u02dd": "\u030b", "\u02db": "\u0328", "\u00af": "\u0304", "\u02c9": "\u0304",
}  # fmt: skip
_ACCENT = re.compile("[" + re.escape("".join(_SPACING_ACCENTS)) + "\u0300-\u036f]")
_SPELT = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)} | {0x02: "-"}


def _lean(function: Any, restype: Any, *argtypes: Any) -> Any:
    """``function`` (a pypdfium2 binding) over plain addresses: no pointer objects made or checked on each of its calls."""
    address = ctypes.cast(function, ctypes.c_void_p).value
    assert address is not None
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


_loose_box = _lean(pdfium_c.FPDFText_GetLooseCharBox, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
# A box's four floats, read from its buffer at once: reading a ctypes array item by item costs 2 us a box.
_four_floats = struct.Struct("4f").unpack_from
_text_object = _lean(pdfium_c.FPDFText_GetTextObject, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


@dataclass(frozen=True)
class PageSpace:
    """The turn from PDF space to the displayed page's points, top-left, y down: its bounding box and its quarter turns."""

    left: float
    bottom: float
    right: float
    top: float
    quarter_turns: int  # clockwise, as /Rotate

    def point(self, x: float, y: float) -> tuple[float, float]:
        turns = self.quarter_turns % 4
        if turns == 1:
            return y - self.bottom, x - self.left
        if turns == 2:
            return self.right - x, y - self.bottom
        if turns == 3:
            return self.top - y, self.right - x
        return x - self.left, self.top - y

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]:
        """A PDF-space rectangle as (left, top, right, bottom) on the displayed page."""
        x0, y0 = self.point(left, bottom)
        x1, y1 = self.point(right, top)
        return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)


@dataclass
class LayerWords:
    """A page's words on the wire ([text, left, top, right, bottom, size, flags], in HUNDREDTHS of a point) and the counts
    of its characters."""

    words: list[list[Any]]
    visible: int = 0
    invisible: int = 0
    ocr_font: bool = False


class _Style:
    """One text object's size in points, its flags, and whether its font is an OCR tool's."""

    __slots__ = ("flags", "ocr_font", "size", "wire_size")

    def __init__(self, size: float, flags: int, ocr_font: bool):
        self.size, self.flags, self.ocr_font = size, flags, ocr_font
        self.wire_size = round(size * HUNDREDTHS)


class _Reader:
    """The characters of one text page, asked for sparingly."""

    def __init__(self, textpage: Any, space: PageSpace):
        self.textpage = textpage
        self.address = ctypes.cast(textpage, ctypes.c_void_p).value
        self.space = space
        self.rect = (ctypes.c_float * 4)()  # FS_RECTF: left, top, right, bottom (PDF space)
        self.rect_address = ctypes.addressof(self.rect)
        self.styles: dict[int | None, _Style] = {}
        self.fonts: dict[int, tuple[bool, bool]] = {}

    def text(self) -> str:
        count = pdfium_c.FPDFText_CountChars(self.textpage)
        if count <= 0:
            return ""
        buffer = (ctypes.c_ushort * (2 * count + 1))()
        written = pdfium_c.FPDFText_GetText(self.textpage, 0, count, buffer)
        text = bytes(buffer)[: max(0, written - 1) * 2].decode("utf-16-le", errors="replace")
        if len(text) != count:  # characters past the BMP (two UTF-16 units each): asked for one by one
            text = "".join(chr(pdfium_c.FPDFText_GetUnicode(self.textpage, i) or 0xFFFD) for i in range(count))
        return text

    def loose(self, index: int) -> tuple[float, float, float, float]:
        """Character ``index``'s box from its font (the line's height, its advance's width), as PDF (left, top, right, bottom)."""
        _loose_box(self.address, index, self.rect_address)
        return _four_floats(self.rect)

    def object_of(self, index: int) -> int | None:
        return _text_object(self.address, index)

    def style(self, obj: int | None, index: int) -> _Style:
        style = self.styles.get(obj)
        if style is None:
            style = self.styles[obj] = self._style(obj, index)
        return style

    def _style(self, obj: int | None, index: int) -> _Style:
        matrix = pdfium_c.FS_MATRIX()
        pdfium_c.FPDFText_GetMatrix(self.textpage, index, matrix)
        size = pdfium_c.FPDFText_GetFontSize(self.textpage, index) * (math.hypot(matrix.c, matrix.d) or 1.0)
        if obj is None:
            return _Style(size, 0, False)
        handle = ctypes.cast(obj, pdfium_c.FPDF_PAGEOBJECT)
        bold, ocr_font = self._font(handle, index)
        invisible = pdfium_c.FPDFTextObj_GetTextRenderMode(handle) in _INVISIBLE_MODES
        return _Style(size, (BOLD if bold else 0) | (INVISIBLE if invisible else 0), ocr_font)

    def _font(self, handle: Any, index: int) -> tuple[bool, bool]:
        """Whether the font of ``handle`` is bold, and whether it is an OCR tool's (by its name), asked once a font."""
        font = pdfium_c.FPDFTextObj_GetFont(handle)
        key = ctypes.cast(font, ctypes.c_void_p).value or 0
        if key not in self.fonts:
            flags = ctypes.c_int()
            size = pdfium_c.FPDFText_GetFontInfo(self.textpage, index, None, 0, flags)
            name = ctypes.create_string_buffer(max(1, size))
            pdfium_c.FPDFText_GetFontInfo(self.textpage, index, name, size, flags)
            text = name.value.decode("utf-8", "replace")
            weight = pdfium_c.FPDFText_GetFontWeight(self.textpage, index)
            bold = weight >= _BOLD_WEIGHT or bool(flags.value & _FORCE_BOLD) or bool(_BOLD_NAME.search(text))
            self.fonts[key] = (bold, bool(_OCR_FONT_NAME.search(text)))
        return self.fonts[key]


def page_words(textpage: Any, space: PageSpace) -> LayerWords:
    """The words of ``textpage`` (pdfium's, of a page seen through ``space``) in pdfium's order, with their counts."""
    reader = _Reader(textpage, space)
    text = reader.text()
    origin: list[int] | None = None
    if _ACCENT.search(text):
        text, origin = _join_accents(reader, text)
    spans = [(match.start(), match.end()) for match in _WORD.finditer(text)]
    object_of = reader.object_of
    starts = [object_of(origin[s] if origin else s) for s, _ in spans]
    starts.append(-1)
    layer = LayerWords(words=[])
    # The loop below runs once a word (~500 on a dense page): what it calls is bound to locals, and a word in one text
    # object (nearly all) is made here, from its two ends' boxes; the rest go through _add_word.
    address, rect, rect_address, styles, loose, four = (
        reader.address,
        reader.rect,
        reader.rect_address,
        reader.styles,
        _loose_box,
        _four_floats,
    )
    upright = space.quarter_turns % 4 == 0
    page_left, page_top, append = space.left, space.top, layer.words.append
    for number, (start, end) in enumerate(spans):
        first, last = (origin[start], origin[end - 1]) if origin else (start, end - 1)
        obj = starts[number]
        if not (starts[number + 1] == obj or first == last or object_of(last) == obj):
            _add_word(layer, reader, _pieces(reader, text, start, end, origin))
            continue
        style = styles.get(obj) or reader.style(obj, first)
        loose(address, first, rect_address)
        left, top, right, bottom = four(rect)
        if last != first:
            loose(address, last, rect_address)
            l1, t1, r1, b1 = four(rect)
            left, top, right, bottom = min(left, l1), max(top, t1), max(right, r1), min(bottom, b1)
        word = text[start:end].translate(_SPELT)
        if style.flags & INVISIBLE:
            layer.invisible += len(word)
        else:
            layer.visible += len(word)
        if upright:
            box = (left - page_left, page_top - top, right - page_left, page_top - bottom)
        else:
            box = space.box(left, bottom, right, top)
        append(
            [
                word,
                int(box[0] * HUNDREDTHS + 0.5),
                int(box[1] * HUNDREDTHS + 0.5),
                int(box[2] * HUNDREDTHS + 0.5),
                int(box[3] * HUNDREDTHS + 0.5),
                style.wire_size,
                style.flags,
            ]
        )
        layer.ocr_font = layer.ocr_font or style.ocr_font
    return layer


def _pieces(reader: _Reader, text: str, start: int, end: int, origin: list[int] | None) -> list[tuple[str, int, int, int | None]]:
    """The span ``start``:``end`` of ``text`` cut where its characters' text object changes."""
    pieces: list[tuple[str, int, int, int | None]] = []
    begin, current = start, None
    for position in range(start, end + 1):
        obj = reader.object_of(origin[position] if origin else position) if position < end else -1
        if position > start and obj != current:
            first, last = (origin[begin], origin[position - 1]) if origin else (begin, position - 1)
            pieces.append((text[begin:position], first, last, current))
            begin = position
        current = obj
    return pieces


def _add_word(layer: LayerWords, reader: _Reader, pieces: list[tuple[str, int, int, int | None]]) -> None:
    """Append the word(s) ``pieces`` make: one, unless a wide gap or a change of line parts two of them."""
    word: list[Any] | None = None
    for text, first, last, obj in pieces:
        style = reader.style(obj, first)
        left, top, right, bottom = _span_box(reader, first, last)
        spelt = text.translate(_SPELT)
        if style.flags & INVISIBLE:
            layer.invisible += len(spelt)
        else:
            layer.visible += len(spelt)
        layer.ocr_font = layer.ocr_font or style.ocr_font
        if word and left - word[3] <= GAP_EM * max(style.size, word[5]) and top < word[4] and bottom > word[2]:
            word[0] += spelt
            word[1:5] = min(word[1], left), min(word[2], top), max(word[3], right), max(word[4], bottom)
            word[5], word[6] = max(word[5], style.size), word[6] | style.flags
            continue
        word = [spelt, left, top, right, bottom, style.size, style.flags]
        layer.words.append(word)
    for listed in layer.words[-len(pieces) :]:
        if isinstance(listed[1], float):  # this word's, in points: to the wire's hundredths
            listed[1:6] = (round(value * HUNDREDTHS) for value in listed[1:6])


def _span_box(reader: _Reader, first: int, last: int) -> tuple[float, float, float, float]:
    """The box around characters ``first`` to ``last`` of one text object, from the two ends' boxes."""
    l0, t0, r0, b0 = reader.loose(first)
    l1, t1, r1, b1 = reader.loose(last) if last != first else (l0, t0, r0, b0)
    return reader.space.box(min(l0, l1), min(b0, b1), max(r0, r1), max(t0, t1))


def _join_accents(reader: _Reader, text: str) -> tuple[str, list[int]]:
    """``text`` with each split accent joined to the letter under it (NFC), and where each of its characters came from."""
    pieces = list(text)
    for match in _ACCENT.finditer(text):
        accent = match.start()
        before, after = _letter_near(text, accent, -1), _letter_near(text, accent, 1)
        target = _covered_letter(reader, accent, [i for i in (before, after) if i is not None])
        if target is None:
            continue
        combining = _SPACING_ACCENTS.get(text[accent], text[accent])
        pieces[target] = unicodedata.normalize("NFC", pieces[target] + combining)
        pieces[accent] = ""
        if before is not None and after is not None and _close(reader, before, after):
            for between in range(before + 1, after):
                if text[between].isspace():
                    pieces[between] = ""  # a space pdfium saw around the accent, not between two words
    origin = [index for index, piece in enumerate(pieces) for _ in piece]
    return "".join(pieces), origin


def _letter_near(text: str, accent: int, step: int) -> int | None:
    """The nearest letter to ``accent`` in direction ``step``, past spaces and other accents, within ACCENT_REACH."""
    index = accent + step
    while 0 <= index < len(text) and abs(index - accent) <= ACCENT_REACH:
        char = text[index]
        if char.isalpha():
            return index
        if not (char.isspace() or _ACCENT.match(char)):
            return None
        index += step
    return None


def _covered_letter(reader: _Reader, accent: int, letters: list[int]) -> int | None:
    """Which of ``letters`` the accent's box lies over most (at least ACCENT_COVER of its width), if any."""
    left, _, right, _ = reader.loose(accent)
    width = max(right - left, 1e-6)
    best, best_cover = None, ACCENT_COVER
    for letter in letters:
        l1, _, r1, _ = reader.loose(letter)
        cover = (min(right, r1) - max(left, l1)) / width
        if cover >= best_cover:
            best, best_cover = letter, cover
    return best


def _close(reader: _Reader, before: int, after: int) -> bool:
    """Whether letters ``before`` and ``after`` stand closer than GAP_EM: one word."""
    size = reader.style(reader.object_of(before), before).size
    return reader.loose(after)[0] - reader.loose(before)[2] <= GAP_EM * size
