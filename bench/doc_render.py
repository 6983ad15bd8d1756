"""Draw laid-out pages as a born-digital PDF with reportlab, and the two pages made by hand.

The hand-made pages are what a text layer gets wrong: one whose headline and
lead paragraph are images, with a short line of real text below them; one
set as TeX and old typesetters do, with ligature glyphs (ﬁ, ﬂ, ﬃ) and
accents drawn as separate glyphs over their letters.
"""

from __future__ import annotations

import io
import random
import unicodedata
from collections.abc import Callable
from typing import Any

from doc_content import Sentences
from doc_fonts import Family, registered, width
from doc_layout import BODY_SIZE, LEADING, MARGIN_X, PAGE_HEIGHT, PAGE_WIDTH, Fragment, FragmentKind, LaidOut, PageDrawing, wrap

# Words of the typography page: each has a ligature or an accent, so each is a test.
LIGATURE_WORDS = (
    "office",
    "find",
    "flow",
    "efficient",
    "affairs",
    "profile",
    "official",
    "afflicted",
    "fifty",
    "reflect",
    "specific",
    "traffic",
)
ACCENT_WORDS = ("café", "résumé", "naïve", "fiancée", "Zürich", "Málaga", "São", "Mináč", "façade", "crème", "Élan", "Gödel")
LIGATURES = (("ffi", "\ufb03"), ("ffl", "\ufb04"), ("ff", "\ufb00"), ("fi", "\ufb01"), ("fl", "\ufb02"))
# Combining mark -> the spacing accent a typesetter draws over the letter.
SPACING_ACCENTS = {
    "\u0301": "\u00b4",
    "\u0308": "\u00a8",
    "\u0300": "`",
    "\u0302": "^",
    "\u0303": "~",
    "\u030c": "\u02c7",
    "\u0327": "\u00b8",
}


def canvas_pdf(pages: int, draw: Callable[[Any, int], None]) -> bytes:
    """A PDF of ``pages`` letter pages, each drawn by ``draw(canvas, index)``."""
    from reportlab.pdfgen import canvas as pdfcanvas

    buffer = io.BytesIO()
    canvas = pdfcanvas.Canvas(buffer, pagesize=(PAGE_WIDTH, PAGE_HEIGHT), invariant=1)
    for index in range(pages):
        draw(canvas, index)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def draw_page(canvas: Any, page: PageDrawing) -> None:
    for box in page.boxes:
        canvas.setFillGray(0.92)
        canvas.setStrokeGray(0.35)
        canvas.rect(box.x, PAGE_HEIGHT - box.y - box.height, box.width, box.height, stroke=1, fill=1)
    canvas.setFillGray(0)
    canvas.setStrokeGray(0)
    canvas.setLineWidth(0.6)
    for rule in page.rules:
        canvas.line(rule.x0, PAGE_HEIGHT - rule.y0, rule.x1, PAGE_HEIGHT - rule.y1)
    for run in page.runs:
        canvas.setFont(run.font, run.size)
        canvas.drawString(run.x, PAGE_HEIGHT - run.baseline, run.text)


def born_digital(laid: LaidOut, pages: list[int] | None = None) -> bytes:
    """The PDF of ``laid`` (or of some of its pages, by index), with the text layer a word processor writes."""
    chosen = [laid.pages[i] for i in (pages if pages is not None else range(len(laid.pages)))]
    return canvas_pdf(len(chosen), lambda canvas, index: draw_page(canvas, chosen[index]))


def text_image(lines: list[str], font_name: str, points: float, dpi: int = 200) -> Any:
    """Lines of text as a grey image, as a designer pastes a headline in: the text is in the pixels only."""
    from doc_fonts import font_file
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(font_file(f"{font_name}.ttf")), round(points * dpi / 72))
    line_px = round(points * LEADING * dpi / 72)
    widest = max(font.getlength(line) for line in lines)
    image = Image.new("L", (round(widest) + 8, line_px * len(lines) + 8), 255)
    drawer = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        drawer.text((4, 4 + number * line_px), line, font=font, fill=0)
    return image


def image_headline(seed: int) -> tuple[bytes, list[Fragment]]:
    """A page whose headline and lead are images, with one short line of text layer (a caption) below them."""
    from reportlab.lib.utils import ImageReader

    sentences = Sentences(random.Random(seed))
    headline, lead = sentences.title(4, 6), sentences.paragraph()
    caption = sentences.sentence()[:57].rsplit(" ", 1)[0]
    bold, regular = registered(Family.SERIF, bold=True), registered(Family.SERIF)
    head_lines = wrap(headline, bold, 26, PAGE_WIDTH - 2 * MARGIN_X)
    lead_lines = wrap(lead, regular, 12, PAGE_WIDTH - 2 * MARGIN_X)
    images = [(text_image(head_lines, f"{Family.SERIF}-Bold", 26), 26.0), (text_image(lead_lines, str(Family.SERIF), 12), 12.0)]

    def draw(canvas: Any, _index: int) -> None:
        y = 72.0
        for image, _points in images:
            height, image_width = image.height * 72 / 200, image.width * 72 / 200
            canvas.drawImage(ImageReader(image), MARGIN_X, PAGE_HEIGHT - y - height, image_width, height)
            y += height + 14
        canvas.setFont(regular, BODY_SIZE)
        canvas.drawString(MARGIN_X, PAGE_HEIGHT - y - BODY_SIZE, caption)

    fragments = [
        Fragment(1, FragmentKind.TITLE, 0, headline),
        Fragment(2, FragmentKind.PARAGRAPH, 0, lead),
        Fragment(3, FragmentKind.PARAGRAPH, 0, caption),
    ]
    return canvas_pdf(1, draw), fragments


def typeset_pieces(word: str) -> list[tuple[str, str]]:
    """``word`` as (drawn glyphs, accent over the last of them) pieces: ligatures substituted, accents split off their letters."""
    pieces: list[tuple[str, str]] = [("", "")]
    for char in unicodedata.normalize("NFD", word):
        if char in SPACING_ACCENTS and pieces[-1][0]:
            pieces[-1] = (pieces[-1][0], SPACING_ACCENTS[char])
            pieces.append(("", ""))
        else:
            pieces[-1] = (pieces[-1][0] + char, "")
    pieces = [piece for piece in pieces if piece[0]]
    if len(pieces) > 1 or pieces[0][1]:
        return pieces
    text = pieces[0][0]
    for plain, ligature in LIGATURES:
        text = text.replace(plain, ligature)
    return [(text, "")]


def draw_typeset_line(canvas: Any, words: list[str], x: float, baseline: float, font: str, size: float) -> None:
    """One line, word by word; an accent is drawn after its letter, centred over it, as a separate glyph."""
    space = width(" ", font, size)
    canvas.setFont(font, size)
    for word in words:
        for glyphs, accent in typeset_pieces(word):
            canvas.drawString(x, PAGE_HEIGHT - baseline, glyphs)
            advance = width(glyphs, font, size)
            if accent:
                letter = glyphs[-1]
                # The spacing accents sit over a lowercase letter already (the cedilla under it); over a capital they go higher.
                lift = size * 0.22 if letter.isupper() and accent != "\u00b8" else 0.0
                over = x + advance - width(letter, font, size) + (width(letter, font, size) - width(accent, font, size)) / 2
                canvas.drawString(over, PAGE_HEIGHT - baseline + lift, accent)
            x += advance
        x += space


def typography(seed: int) -> tuple[bytes, list[Fragment]]:
    """A page of paragraphs full of ligature and accented words, set with separate glyphs; its fragments in plain NFC text."""
    rng = random.Random(seed)
    sentences = Sentences(rng)
    font = registered(Family.SERIF)
    paragraphs = []
    for _ in range(4):
        words = sentences.paragraph().split()
        for _ in range(len(words) // 5):
            words.insert(rng.randrange(1, len(words)), rng.choice(LIGATURE_WORDS + ACCENT_WORDS))
        paragraphs.append(" ".join(words))
    laid = [wrap(text, font, 11, PAGE_WIDTH - 2 * MARGIN_X) for text in paragraphs]

    def draw(canvas: Any, _index: int) -> None:
        y = 80.0
        for lines in laid:
            for line in lines:
                draw_typeset_line(canvas, line.split(), MARGIN_X, y + 11, font, 11)
                y += 11 * LEADING * 1.2
            y += 11

    fragments = [
        Fragment(n, FragmentKind.PARAGRAPH, 0, unicodedata.normalize("NFC", " ".join(lines))) for n, lines in enumerate(laid, start=1)
    ]
    return canvas_pdf(1, draw), fragments
