"""OCR of scanned pages: quality (CER, WER), one core's speed, peak RSS and a Lambda cost model.

Engine: RapidOCR 3.10 on onnxruntime, with the models its wheel ships
(PP-OCRv6 detection and recognition, the v2 angle classifier); nothing is
downloaded at run time. It is built with the ``ocr`` processor's own
settings (``s3wq.processors.ocr.engine.ENGINE_PARAMS``: one thread,
detection on the long side at 1280 px, onnxruntime's memory arena on);
``--param`` changes any of them. Scans reach it as a PDF page rendered by
pypdfium2 in the processor's decoder process (``s3wq.processors.ocr.decoding``),
as the ``ocr`` processor reads them; one condition also feeds the PNG image
itself, without a PDF.

Pages with known text: Pillow draws US-letter pages at 150, 200 and 300 dpi
with the machine's DejaVu fonts (Sans and Serif, alternating by page), in
three blocks at 10, 12 and 14 pt. The lines are words drawn from a fixed list
with a seeded ``random.Random`` (capitals after a full stop, commas, some
numbers), so every run sees the same pages. Each page is degraded under one
condition:

* ``clean``: as drawn;
* ``rotated``: turned by up to 2 degrees either way (seeded);
* ``blur``: Gaussian blur, radius 1 px at 200 dpi (scaled with the dpi);
* ``noise``: Gaussian noise, sigma 24 grey levels;
* ``jpeg``: JPEG at quality 20, decoded again;
* ``png``: the clean page as a PNG image, OCR'd without a PDF.

Each degraded page is stored losslessly (8-bit grey, Flate) as the only image
of a one-page PDF at its dpi, then rendered by pypdfium2 at the render dpi (by
default the scan's own; ``--render-dpi`` compares others) and OCR'd. OCR lines
are put in reading order (grouped top to bottom by their box centres, then
left to right) and compared with the known text, whitespace folded to single
spaces: CER is the character edit distance over the reference's length, WER
the same over words (a small Levenshtein of our own; totals over all pages of
a cell, not a mean of per-page rates).

Speed is one core's: ``OMP_NUM_THREADS=1`` is set before onnxruntime loads,
the sessions get ``intra_op_num_threads=1`` and ``inter_op_num_threads=1``,
and OpenCV ``setNumThreads(1)``. Seconds per page are wall time of render plus
OCR, after one warm-up page (model load is reported apart), and CPU time
(``time.process_time``, and the decoder's own for the page's open and render)
beside it. With one thread the CPU time is the core-seconds the page cost,
whatever else the machine runs, so the per-core speed, the 3-second target and
the cost model use it; wall time exceeds it when the machine is shared. The
decoder's start, once a group in the processor, is reported apart
(``decoder``).

Text layer: ``s3wq.dev.samples.make_pdf`` writes a PDF of many pages of known
lines; pypdf extracts every page, timed in pages per second, and each page must
match exactly.

Cost model: Lambda arm64 in us-east-1 at the prices of the date assumed
(2026-12-01): $0.0000133334 per GB-second and $0.20 per million requests, one
request per page (the worst case; s3wq's groups carry many). It ASSUMES that
one vCPU-second of Lambda arm64 (Graviton) does the work of one core-second of
this machine: not measured here. One thread uses one vCPU whatever the memory,
so a larger memory size only costs more, unless pages run side by side.

RapidOCR shrinks any page whose long side exceeds ``Global.max_side_len``
(2000 px by default) before detection, so a letter page rendered above about
180 dpi reaches the models at the same size; ``--param`` changes that and any
other RapidOCR setting.

Peak RSS is the process's high-water mark (VmHWM) after the text layer, after
the engine's load and at the end.

Runs in the OCR venv, never the project's: ``.venv-ocr/``, with the pins
the ``ocr`` processor is tested and deployed with (the OCR tests build the
same venv):

    python3 -m venv .venv-ocr
    .venv-ocr/bin/pip install -r requirements.txt -r requirements-ocr.txt
    .venv-ocr/bin/python bench/ocr.py > ocr.json
    .venv-ocr/bin/python bench/ocr.py --pages 10 --text-pages 1000
    .venv-ocr/bin/python bench/ocr.py --dpi 300 --render-dpi 150,200,300 --conditions clean,blur,jpeg
"""

from __future__ import annotations

import os

# Before onnxruntime and numpy load: their thread pools read it once.
os.environ["OMP_NUM_THREADS"] = "1"

import argparse
import importlib.metadata
import io
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO_ROOT, emit, machine, peak_rss_mb, positive_ints, target

INSTALL = "make ocr-venv, then .venv-ocr/bin/python bench/ocr.py"
np = onnxruntime = pypdf = Image = ImageDraw = ImageFilter = ImageFont = RapidOCR = Decoder = None  # see load_engine_modules


def load_engine_modules() -> None:
    """Import the OCR stack, which only .venv-ocr has (after --help, so that works anywhere)."""
    global np, onnxruntime, pypdf, Image, ImageDraw, ImageFilter, ImageFont, RapidOCR, Decoder
    try:
        import numpy as np
        import onnxruntime
        import pypdf
        from PIL import Image, ImageDraw, ImageFilter, ImageFont
        from rapidocr import RapidOCR

        from s3wq.processors.ocr.decoding import Decoder
    except ImportError as exc:
        print(f"bench/ocr.py needs its own venv ({exc.name} is missing): {INSTALL}", file=sys.stderr)
        raise SystemExit(2) from None


sys.path.insert(0, str(REPO_ROOT / "lambdas"))
from s3wq.dev.samples import image_pdf, make_pdf  # noqa: E402  (lambdas/ is on the path only from here)

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf")
POINT_SIZES = (10, 12, 14)
LINES_PER_BLOCK = 8
PAGE_INCHES = (8.5, 11.0)
MARGIN_INCHES = 1.0
CONDITIONS = ("clean", "rotated", "blur", "noise", "jpeg", "png")
DEGRADED = ("rotated", "blur", "noise", "jpeg")
TEXT_LINES_PER_PAGE = 40

# Lambda arm64, us-east-1, as assumed on this date.
PRICE_DATE = "2026-12-01"
PRICE_GB_SECOND = 0.0000133334
PRICE_PER_MILLION_REQUESTS = 0.20
ANCHORS = [
    {"name": "olmocr (7B VLM on GPUs)", "usd_per_million_pages": 176.0, "source": "olmOCR paper, arXiv 2502.18443"},
    {"name": "GPT-4o", "usd_per_million_pages": 6240.0, "more_than": True, "source": "olmOCR paper, arXiv 2502.18443"},
    {"name": "dots.ocr on Modal GPUs", "usd_per_million_pages": 2270.0, "source": "$2.27 per 1,000 pages, measured by a third party"},
    {
        "name": "Amazon Textract DetectDocumentText",
        "usd_per_million_pages": 1500.0,
        "source": "AWS's Textract pricing page: $1.50 per 1,000 pages for a month's first million, $0.60 beyond (us-east-1); "
        "as last read there, not re-checked from this machine, which reaches no web page",
    },
]

TARGET_CER_CLEAN = 0.02
TARGET_CER_DEGRADED = 0.05
TARGET_TEXT_PAGES_PER_S = 50.0
TARGET_CORE_S_PER_PAGE = 3.0
TARGET_USD_PER_MILLION = 60.0

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


# --- pages with known text ---------------------------------------------------


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


# --- scoring -----------------------------------------------------------------


def levenshtein(a: Any, b: Any) -> int:
    """Edit distance between two sequences (characters of a string, or words of a list)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, item in enumerate(a, start=1):
        current = [i]
        for j, other in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (item != other)))
        previous = current
    return previous[-1]


def reading_order(boxes: Any, texts: Any) -> list[str]:
    """OCR boxes as printed lines: grouped top to bottom by centre, then each line left to right."""
    if boxes is None or texts is None:
        return []
    items = sorted(
        ((float(np.mean(box[:, 1])), float(np.min(box[:, 0])), float(np.ptp(box[:, 1])), text) for box, text in zip(boxes, texts)),
    )
    lines: list[list[tuple[float, float, float, str]]] = []
    for item in items:
        if lines and abs(item[0] - statistics.fmean(i[0] for i in lines[-1])) < item[2] / 2:
            lines[-1].append(item)
        else:
            lines.append([item])
    return [" ".join(i[3] for i in sorted(line, key=lambda i: i[1])) for line in lines]


def folded(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


# --- measurements ------------------------------------------------------------


def measure_text_layer(pages: int, seed: int) -> dict:
    rng = random.Random(seed)
    known = [page_lines(rng, TEXT_LINES_PER_PAGE, 11) for _ in range(pages)]
    pdf = make_pdf(known)
    started = time.perf_counter()
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    extracted = [page.extract_text() for page in reader.pages]
    seconds = time.perf_counter() - started
    exact = sum(1 for text, lines in zip(extracted, known) if [line.strip() for line in text.splitlines() if line.strip()] == lines)
    return {
        "pages": pages,
        "lines_per_page": TEXT_LINES_PER_PAGE,
        "pdf_bytes": len(pdf),
        "seconds": round(seconds, 3),
        "pages_per_s": round(pages / seconds, 1),
        "exact_pages": exact,
        "exact": exact == pages,
    }


def engine_params(overrides: dict[str, Any]) -> dict[str, Any]:
    """The ocr processor's own settings (one thread, its detection size), then ``--param``'s over them."""
    from s3wq.processors.ocr.engine import ENGINE_PARAMS

    return {**ENGINE_PARAMS, "Global.log_level": "warning", **overrides}


def make_engine(overrides: dict[str, Any]) -> RapidOCR:
    params = engine_params(overrides)
    engine = RapidOCR(params=params)
    import cv2  # rapidocr's own dependency, loaded by now

    cv2.setNumThreads(1)
    return engine


def engine_param(text: str) -> tuple[str, Any]:
    """``Det.limit_side_len=960`` -> ("Det.limit_side_len", 960), for argparse."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


# Far from any page here: a decoder reply is never waited for past it, and the cell's dpi is never capped.
_FOREVER_SECONDS = 3600
_NO_PIXEL_CAP = 200_000_000


def decoder_for(dpi: int) -> Decoder:
    """The processor's decoder (its own process), rendering at ``dpi``."""
    from s3wq.processors.ocr.settings import OcrSettings

    return Decoder(OcrSettings(dpi=dpi, max_pixels=_NO_PIXEL_CAP))


def render(decoder: Decoder, pdf: bytes) -> np.ndarray:
    """The PDF's one page as the processor's decoder renders it (grey), as RGB as before the decoder (the engine's input unchanged)."""
    until = time.monotonic() + _FOREVER_SECONDS
    decoder.open(pdf, "pdf", until=until)
    page = decoder.page(0, until=until)
    return np.asarray(Image.fromarray(page.pixels).convert("RGB"))


def decoder_start(starts: int = 5) -> dict:
    """What starting the processor's decoder costs (it does once a group): wall and core-seconds, the median of ``starts``."""
    walls, cpus = [], []
    for _ in range(starts):
        started, started_cpu = time.perf_counter(), time.process_time()
        with decoder_for(200) as decoder:
            decoder.start()
            child = decoder.cpu_seconds
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - started_cpu + child)
    return {"start_s": round(statistics.median(walls), 3), "start_cpu_s": round(statistics.median(cpus), 3), "starts": starts}


def ocr_cell(engine: RapidOCR, condition: str, scan_dpi: int, render_dpi: int, pages: int, seed: int) -> dict:
    """Every page of one condition at one scan dpi and render dpi, scored and timed."""
    char_edits = char_total = word_edits = word_total = exact_lines = total_lines = 0
    wall = cpu = render_s = 0.0
    scores: list[float] = []
    rendered_pixels = None
    with decoder_for(render_dpi) as decoder:
        if condition != "png":
            decoder.start()  # apart from the pages: the processor starts it once a group
        for page in range(pages):
            page_seed = seed * 1000 + page
            clean, lines = draw_page(page_seed, scan_dpi)
            scan = degrade(clean, condition, scan_dpi, random.Random(page_seed))
            if condition == "png":
                buffer = io.BytesIO()
                scan.save(buffer, "PNG")
                payload = buffer.getvalue()
            else:
                payload = image_pdf([scan], scan_dpi)
            started, started_cpu, decoder_cpu = time.perf_counter(), time.process_time(), decoder.cpu_seconds
            pixels = payload if condition == "png" else render(decoder, payload)
            rendered = time.perf_counter()
            result = engine(pixels)
            wall += time.perf_counter() - started
            cpu += time.process_time() - started_cpu + decoder.cpu_seconds - decoder_cpu
            render_s += rendered - started
            rendered_pixels = f"{result.img.shape[1]}x{result.img.shape[0]}" if result.img is not None else None
            found = reading_order(result.boxes, result.txts)
            scores.extend(result.scores or ())
            reference, hypothesis = folded(lines), folded(found)
            char_edits += levenshtein(reference, hypothesis)
            char_total += len(reference)
            word_edits += levenshtein(reference.split(), hypothesis.split())
            word_total += len(reference.split())
            exact_lines += len(set(lines) & set(found))
            total_lines += len(lines)
    return {
        "condition": condition,
        "scan_dpi": scan_dpi,
        "render_dpi": scan_dpi if condition == "png" else render_dpi,
        "pages": pages,
        "cer": round(char_edits / char_total, 4),
        "wer": round(word_edits / word_total, 4),
        "lines_exact": f"{exact_lines}/{total_lines}",
        "mean_confidence": round(statistics.fmean(scores), 3) if scores else None,
        "s_per_page": round(wall / pages, 3),
        "cpu_s_per_page": round(cpu / pages, 3),
        "render_s_per_page": round(render_s / pages, 3),
        "pages_per_s_per_core": round(pages / wall, 3),
        "rendered_pixels": rendered_pixels,
    }


def lambda_cost(s_per_page: float, memory_mb: int) -> dict:
    compute = 1_000_000 * s_per_page * memory_mb / 1024 * PRICE_GB_SECOND
    requests = PRICE_PER_MILLION_REQUESTS  # one request per page
    return {"memory_mb": memory_mb, "usd_compute": round(compute, 2), "usd_requests": requests, "usd": round(compute + requests, 2)}


def engine_description(overrides: dict[str, Any], load_s: float) -> dict:
    models = Path(importlib.import_module("rapidocr").__file__).parent / "models"
    return {
        "name": "RapidOCR on onnxruntime, pages rendered by pypdfium2",
        "versions": {
            name: importlib.metadata.version(name) for name in ("rapidocr", "onnxruntime", "pypdfium2", "pypdf", "pillow", "numpy")
        },
        "models": sorted(p.name for p in models.glob("*.onnx")),
        "onnxruntime_providers": onnxruntime.get_available_providers(),
        "threads": "OMP_NUM_THREADS=1; onnxruntime intra_op_num_threads=1, inter_op_num_threads=1; cv2.setNumThreads(1)",
        "params_over_rapidocr_defaults": engine_params(overrides),
        "load_and_warm_up_s": round(load_s, 2),
    }


def by_render_dpi(cells: list[dict], memories: list[int]) -> dict:
    """Speed and cost of the PDF scans at each render dpi, all conditions together."""
    by_render: dict[str, dict] = {}
    for dpi in sorted({c["render_dpi"] for c in cells}):
        here = [c for c in cells if c["render_dpi"] == dpi and c["condition"] != "png"]
        if not here:
            continue
        pages = sum(c["pages"] for c in here)
        s = sum(c["s_per_page"] * c["pages"] for c in here) / pages
        core_s = sum(c["cpu_s_per_page"] * c["pages"] for c in here) / pages
        by_render[str(dpi)] = {
            "pages": pages,
            "s_per_page": round(s, 3),
            "cpu_s_per_page": round(core_s, 3),
            "pages_per_s_per_core": round(1 / core_s, 3),
            "mean_cer": round(statistics.fmean(c["cer"] for c in here), 4),
            "cost_per_million_pages": [lambda_cost(core_s, m) for m in memories],
        }
    return by_render


def build_targets(cells: list[dict], text_layer: dict, by_render: dict, headline_dpi: int, memories: list[int]) -> list[dict]:
    def cer(condition: str, dpi: int) -> float | None:
        """The worst CER of ``condition`` among pages rendered at ``dpi``, whatever dpi they were scanned at."""
        found = [c["cer"] for c in cells if c["condition"] == condition and c["render_dpi"] == dpi]
        return max(found, default=None)

    degraded_here = [cer(c, headline_dpi) for c in DEGRADED if cer(c, headline_dpi) is not None]
    degraded_all = [c["cer"] for c in cells if c["condition"] in DEGRADED]
    headline = by_render.get(str(headline_dpi), {})
    s = headline.get("cpu_s_per_page")
    cheapest = min((c["usd"] for c in headline.get("cost_per_million_pages", [])), default=None)
    return [
        target(f"CER clean, rendered at {headline_dpi} dpi", cer("clean", headline_dpi), TARGET_CER_CLEAN),
        target(f"CER worst degraded condition, rendered at {headline_dpi} dpi", max(degraded_here, default=None), TARGET_CER_DEGRADED),
        target("CER worst degraded condition, any dpi", max(degraded_all, default=None), TARGET_CER_DEGRADED),
        target("text-layer pages exact (fraction)", text_layer["exact_pages"] / text_layer["pages"], 1.0, at_most=False),
        target("text-layer pages/s", text_layer["pages_per_s"], TARGET_TEXT_PAGES_PER_S, at_most=False),
        target(f"s of one core per scanned page, {headline_dpi} dpi", s, TARGET_CORE_S_PER_PAGE, unit=" s"),
        target(f"USD per million scanned pages, Lambda arm64 {min(memories)} MB, {headline_dpi} dpi", cheapest, TARGET_USD_PER_MILLION),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2, help="pages per condition and dpi (default 2)")
    parser.add_argument("--dpi", type=positive_ints, default=[150, 200, 300], help="scan dpi, comma-separated (default 150,200,300)")
    parser.add_argument(
        "--render-dpi", type=positive_ints, default=None, help="dpi pypdfium2 renders at, comma-separated (default: each scan's own dpi)"
    )
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help=f"comma-separated, of {', '.join(CONDITIONS)}")
    parser.add_argument("--text-pages", type=int, default=500, help="pages of the text-layer PDF (default 500)")
    parser.add_argument(
        "--memory-mb",
        type=positive_ints,
        default=[1769, 2048, 3008],
        help="Lambda memory sizes to cost (default 1769,2048,3008: 1769 MB is where Lambda gives one full vCPU)",
    )
    parser.add_argument("--headline-dpi", type=int, default=200, help="the render dpi the targets are judged at (default 200)")
    parser.add_argument(
        "--param",
        type=engine_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a RapidOCR parameter over the ocr processor's (s3wq.processors.ocr.engine.ENGINE_PARAMS), repeatable "
        "(e.g. Det.limit_side_len=1600; Det.limit_type=min Det.limit_side_len=736 for RapidOCR's own)",
    )
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    load_engine_modules()
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if unknown := set(conditions) - set(CONDITIONS):
        parser.error(f"unknown conditions: {', '.join(sorted(unknown))}")
    if not all((FONT_DIR / font).exists() for font in FONTS):
        raise SystemExit(f"bench/ocr.py needs the DejaVu fonts in {FONT_DIR} (Debian: apt-get install fonts-dejavu-core)")

    text_layer = measure_text_layer(args.text_pages, args.seed)
    rss = {"after_text_layer": peak_rss_mb()}

    started = time.perf_counter()
    overrides = dict(args.param)
    engine = make_engine(overrides)
    warm_up, _ = draw_page(args.seed - 1, 150)
    engine(np.asarray(warm_up.convert("RGB")))
    load_s = time.perf_counter() - started
    rss["after_engine_load"] = peak_rss_mb()

    cells = []
    for scan_dpi in args.dpi:
        for condition in conditions:
            renders = [scan_dpi] if condition == "png" else (args.render_dpi or [scan_dpi])
            for render_dpi in renders:
                cell = ocr_cell(engine, condition, scan_dpi, render_dpi, args.pages, args.seed)
                cells.append(cell)
                print(
                    f"{condition:>8} scan {scan_dpi} render {cell['render_dpi']}: CER {cell['cer']:.2%} WER {cell['wer']:.2%} "
                    f"{cell['s_per_page']:.2f} s/page",
                    file=sys.stderr,
                )
    rss["peak"] = peak_rss_mb()
    decoder = decoder_start()

    by_render = by_render_dpi(cells, args.memory_mb)
    result = {
        "benchmark": "ocr",
        "machine": machine(),
        "engine": engine_description(overrides, load_s),
        "params": {
            "pages_per_cell": args.pages,
            "scan_dpi": args.dpi,
            "render_dpi": args.render_dpi or "each scan's own",
            "conditions": conditions,
            "fonts": list(FONTS),
            "point_sizes": list(POINT_SIZES),
            "lines_per_page": LINES_PER_BLOCK * len(POINT_SIZES),
            "seed": args.seed,
        },
        "text_layer": text_layer,
        "decoder": decoder,
        "scans": cells,
        "by_render_dpi": by_render,
        "peak_rss_mb": rss,
        "cost_model": {
            "prices": {
                "date_assumed": PRICE_DATE,
                "region": "us-east-1",
                "architecture": "arm64",
                "usd_per_gb_second": PRICE_GB_SECOND,
                "usd_per_million_requests": PRICE_PER_MILLION_REQUESTS,
            },
            "assumptions": [
                "ASSUMED, not measured: one Lambda arm64 vCPU-second does the work of one core-second of this machine",
                "billed duration per page = the CPU seconds per page of the one-thread run (render + OCR), i.e. core-seconds; "
                "wall seconds are printed beside them and exceed them when this machine is shared",
                "one request per page (worst case); model load is paid once per cold start, not per page",
                "one thread uses one vCPU at any memory size, so more memory costs more per page",
            ],
            "anchors": ANCHORS,
        },
        "targets": build_targets(cells, text_layer, by_render, args.headline_dpi, args.memory_mb),
    }
    table = [
        (c["condition"], c["scan_dpi"], c["render_dpi"], c["cer"], c["wer"], c["lines_exact"], c["s_per_page"], c["cpu_s_per_page"])
        for c in cells
    ]
    emit(result, table, ("condition", "scan dpi", "render dpi", "CER", "WER", "lines exact", "s/page", "cpu s/page"))


if __name__ == "__main__":
    main()
