"""bench/ocr.py's pages with known text: seeded lines drawn by Pillow in DejaVu fonts, and the conditions that degrade a scan.

Pillow and numpy are imported inside the functions: only .venv-ocr has
them, and bench/ocr.py's ``--help`` runs in any venv.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf")
POINT_SIZES = (10, 12, 14)
LINES_PER_BLOCK = 8
PAGE_INCHES = (8.5, 11.0)
MARGIN_INCHES = 1.0
CONDITIONS = ("clean", "rotated", "blur", "noise", "jpeg", "png")
DEGRADED = ("rotated", "blur", "noise", "jpeg")

# Everyday English of reports and letters: what a scanned document holds.
WORDS = """
the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her
she there been one all we their has would when if so no will can more about said out up them some could into than other
time only new year people may first any work over such very after also most made many must before where through back
years well much should because each those between under never same another while last might great since against right
three during without again place around however small found part general case company number report council market
service system public account letter order office board member policy water house money market price payment invoice
contract record budget insurance hospital school student teacher manager customer supplier quarter monthly annual
department committee meeting minutes review approval schedule delivery shipment warehouse inventory balance statement
interest capital property agreement section page figure table chapter volume issue article evidence result analysis
""".split()


def page_lines(rng: random.Random, count: int, max_words: int) -> list[str]:
    """``count`` lines of sentences, each line at most ``max_words`` words (the drawer fits them to the width)."""
    lines = []
    capital = True
    for _ in range(count):
        words = []
        for _ in range(rng.randint(max_words - 3, max_words)):
            word = str(rng.choice([rng.randint(2, 99), rng.randint(1000, 9999), f"{rng.randint(1, 99)},{rng.randint(100, 999)}"]))
            if rng.random() >= 0.06:
                word = rng.choice(WORDS)
            if capital:
                word = word.capitalize()
            capital = False
            roll = rng.random()
            if roll < 0.08:
                word += "."
                capital = True
            elif roll < 0.14:
                word += ","
            words.append(word)
        lines.append(" ".join(words))
    return lines


def draw_page(seed: int, dpi: int) -> tuple[Image.Image, list[str]]:
    """A clean grey page at ``dpi`` and its lines, the same words at every dpi for one seed."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    font_path = FONT_DIR / FONTS[seed % len(FONTS)]
    width, height = (round(side * dpi) for side in PAGE_INCHES)
    margin = round(MARGIN_INCHES * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    text_width = width - 2 * margin
    y = margin
    lines: list[str] = []
    for points in POINT_SIZES:
        font = ImageFont.truetype(str(font_path), round(points * dpi / 72))
        leading = round(points * 1.35 * dpi / 72)
        for line in page_lines(rng, LINES_PER_BLOCK, 14 - points // 2):
            while draw.textlength(line, font=font) > text_width:
                line = line.rsplit(" ", 1)[0]
            draw.text((margin, y), line, font=font, fill=0)
            lines.append(line)
            y += leading
        y += leading  # a blank line between blocks
    return image, lines


def degrade(image: Image.Image, condition: str, dpi: int, rng: random.Random) -> Image.Image:
    import numpy as np
    from PIL import Image, ImageFilter

    if condition == "rotated":
        return image.rotate(rng.uniform(-2.0, 2.0), resample=Image.Resampling.BICUBIC, fillcolor=255)
    if condition == "blur":
        return image.filter(ImageFilter.GaussianBlur(radius=dpi / 200))
    if condition == "noise":
        noisy = np.asarray(image, dtype=np.float32) + np.random.default_rng(rng.randint(0, 2**31)).normal(
            0, 24, (image.height, image.width)
        )
        return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    if condition == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=20)
        return Image.open(io.BytesIO(buffer.getvalue())).convert("L")
    return image
