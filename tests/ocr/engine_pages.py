"""Pages drawn for the engine's tests, read by read_page in the OCR venv: ``python engine_pages.py`` prints what it read of each, as JSON.

Each page is drawn with DejaVu Sans (s3wq.dev.samples) at 200 dpi: words with
an extra gap inside or too little between them, a line the engine's first
reading turns to garbage, a speck the engine reads as "米", clean and degraded print, and a pseudo-handwritten
page (each character jittered in size, rotation and baseline, joined by pen
strokes). The reading of each is printed with its cost in core-seconds.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from s3wq.dev.samples import draw_scan, scan_font
from s3wq.processors.ocr.engine import load_engine, read_page
from s3wq.processors.ocr.line_reading import lines_of

DPI = 200
SPLIT_LINE = "The major reforms were became law in the town"  # drawn with a little extra white after each "m"
JOINED_LINE = "The new April timber arrived, seven barrels treasurer paid the bill"  # drawn with half a space between some words
JOINED_AT = ("April", "barrels")
# A short page the engine's first reading of whose first line is garbage (RapidOCR 3.10: "lnv    - ry"), read well cropped again.
GARBLED_PAGE = ["Invoice 2024-117 for the quarterly delivery", "The warehouse confirmed the shipment on Monday"]
LETTER = [
    "Dear Mr Whitfield,",
    "Thank you for your letter of the fourth of March about the delivery",
    "of timber to the new school. The council has agreed to the revised",
    "schedule, and the first load will arrive at the yard on Monday.",
    "Payment of 1,482 EUR is due within thirty days of the invoice date,",
    "as set out in section 4 of the contract signed on 12 January 2024.",
    "Please quote the order number 2024-117 on every payment you make.",
    "The warehouse confirmed that the barrels were shipped on Friday and",
    "the treasurer will send a receipt once the accounts are closed.",
    "We are grateful for your patience while the roads were repaired,",
    "and we look forward to working with you again in the spring.",
    "The minutes of the last meeting are enclosed for your records.",
    "Yours sincerely,",
    "Margaret Ellison, Clerk to the Council",
]
HAND_LINES = LETTER[1:9]
SPECK_LINE = ("The office is open", "on Monday")


def draw_pieces(pieces: list[tuple[str, float]], pixels: int, *, top: int = 100, size: tuple[int, int] = (1700, 300)) -> Image.Image:
    """A white strip with ``pieces`` drawn left to right, each followed by its extra gap (pixels, may be negative)."""
    image = Image.new("L", size, 255)
    draw, font, x = ImageDraw.Draw(image), scan_font(pixels), 150.0
    for text, gap in pieces:
        draw.text((x, top), text, font=font, fill=0)
        x += draw.textlength(text, font=font) + gap
    return image


def split_page() -> Image.Image:
    """SPLIT_LINE at 12 pt with 4 and 5 px more white after the "m" of "major" and "became": the engine reads "m ajor", "becam e"."""
    return draw_pieces([("The m", 4), ("ajor reforms were becam", 5), ("e law in the town", 0)], 33)


def joined_page() -> Image.Image:
    """JOINED_LINE at 8 pt with half a space after "April" and "barrels": the engine reads "Apriltimber", "barrelstreasurer"."""
    font = scan_font(22)
    half = -font.getlength(" ") / 2
    return draw_pieces([("The new April", half), (" timber arrived, seven barrels", half), (" treasurer paid the bill", 0)], 22)


def degraded(image: Image.Image, seed: int, severe: bool = False) -> Image.Image:
    """``image`` as a poor scan gives it: faded, blurred, with grain and specks; ``severe``: a fax of a photocopy, at half the dpi."""
    rng = np.random.default_rng(seed)
    if severe:
        image = image.resize((image.width // 2, image.height // 2), Image.Resampling.BILINEAR).resize(image.size, Image.Resampling.NEAREST)
    pixels = np.asarray(image.filter(ImageFilter.GaussianBlur(1.8 if severe else 1.2)), dtype=float)
    pixels = 255 - (255 - pixels) * (0.45 if severe else 0.6) + rng.normal(0, 45 if severe else 28, pixels.shape)
    pixels[rng.random(pixels.shape) < (0.01 if severe else 0.002)] = 0
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def handwritten(lines: list[str], seed: int) -> Image.Image:
    """``lines`` as a hand writes them: each character's size, slant and baseline jittered, pen strokes between letters."""
    rng = random.Random(seed)
    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        x, baseline, drift = 150.0, 200.0 + number * 95, 0.0
        for char in line:
            pixels = round(36 * rng.uniform(0.65, 1.4))
            drift = max(-14.0, min(14.0, drift + rng.uniform(-5, 5)))
            if char != " ":
                glyph = Image.new("L", (pixels * 2, pixels * 2), 0)
                ImageDraw.Draw(glyph).text(
                    (pixels // 2, pixels // 4), char, font=scan_font(pixels), fill=255, stroke_width=rng.choice((0, 1, 1, 2))
                )
                glyph = glyph.rotate(rng.uniform(-25, 25), resample=Image.Resampling.BICUBIC)
                image.paste(0, (round(x - pixels / 2), round(baseline + drift - pixels)), glyph)
                if rng.random() < 0.5:  # a joining stroke to the next letter
                    y = baseline + drift - rng.uniform(0, pixels * 0.3)
                    draw.line([(x + pixels * 0.45, y), (x + pixels * 0.75, y + rng.uniform(-6, 6))], fill=0, width=2)
            x += scan_font(pixels).getlength(char) * rng.uniform(0.95, 1.25)
    return image


def letter_page() -> Image.Image:
    return draw_scan(LETTER, dpi=DPI)


def speck_page() -> Image.Image:
    """SPECK_LINE at 12 pt with a mark of pen strokes between "open" and "on" that RapidOCR's Chinese+English model reads as "米"."""
    image = draw_pieces([(SPECK_LINE[0], 60), (SPECK_LINE[1], 0)], 33)
    draw = ImageDraw.Draw(image)
    x, y, side = 150 + ImageDraw.Draw(image).textlength(SPECK_LINE[0], font=scan_font(33)) + 15, 104, 30
    for start, end in [
        ((0, 0.45), (1, 0.45)),  # the cross
        ((0.5, 0), (0.5, 1)),
        ((0.5, 0.5), (0.07, 1)),  # the strokes down either side
        ((0.5, 0.5), (0.93, 1)),
        ((0.17, 0.13), (0.33, 0.35)),  # the dots above
        ((0.83, 0.13), (0.67, 0.35)),
    ]:
        draw.line([(x + start[0] * side, y + start[1] * side), (x + end[0] * side, y + end[1] * side)], fill=0, width=3)
    return image


def first_reading(image: Image.Image) -> list[str]:
    """The lines the engine reads on ``image`` without a second reading or respacing: what the old read_page gave."""
    engine = load_engine()
    result = engine(np.asarray(image), use_det=True, use_cls=True, return_word_box=True, return_single_char_box=True, text_score=0.5)
    return [line.text for line in lines_of(result)]


def reading(image: Image.Image, origin: tuple[float, float] = (0.0, 0.0)) -> dict:
    """What read_page gives for ``image``, with its cost in core-seconds."""
    pixels = np.asarray(image)
    started = time.process_time()
    read = read_page(pixels, DPI, origin)
    seconds = time.process_time() - started
    return {
        "seconds": round(seconds, 3),
        "lines": [line.text for line in read.read_lines if line.text.strip()],  # the engine's order: each test page is one column
        "confidence": read.confidence,
        "low_confidence": read.low_confidence,
        "handwriting": read.handwriting,
        "unevenness": read.unevenness,
        "words": [{"text": w.text, "box": dataclasses.astuple(w.box), "size": w.size, "confidence": w.confidence} for w in read.words],
        "read_lines": [{"text": line.text, "score": line.score, "reread": line.reread} for line in read.read_lines],
    }


def main() -> dict:
    load_engine()
    read_page(np.asarray(draw_pieces([("warm up", 0)], 33)), DPI)  # the first call loads the models: not a page's cost
    garbled = draw_scan(GARBLED_PAGE, dpi=DPI, inches=(8.5, 2.5))
    return {
        "known": {"split": SPLIT_LINE, "joined": JOINED_LINE, "garbled": GARBLED_PAGE, "letter": LETTER, "speck": " ".join(SPECK_LINE)},
        "split": {"first": first_reading(split_page()), "read": reading(split_page())},
        "joined": {"first": first_reading(joined_page()), "read": reading(joined_page())},
        "garbled": {"first": first_reading(garbled), "read": reading(garbled)},
        "origin": reading(split_page(), origin=(36.0, 500.0)),
        "speck": {"first": first_reading(speck_page()), "read": reading(speck_page())},
        "letter": {"first": first_reading(letter_page()), **reading(letter_page())},
        "letter_degraded": [
            {"first": first_reading(degraded(letter_page(), seed)), **reading(degraded(letter_page(), seed))} for seed in (1, 2)
        ],
        "letter_severe": [reading(degraded(letter_page(), seed, severe=True)) for seed in (1, 2)],
        "handwritten": [reading(handwritten(HAND_LINES, seed)) for seed in (1, 2)],
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout)
