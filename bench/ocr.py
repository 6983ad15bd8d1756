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

from common import REPO_ROOT, emit, machine, peak_rss_mb, positive_ints
from ocr_cost import COST_MODEL, build_targets, by_render_dpi
from ocr_pages import CONDITIONS, FONT_DIR, FONTS, LINES_PER_BLOCK, POINT_SIZES, degrade, draw_page, page_lines
from ocr_scoring import folded, levenshtein, reading_order

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

TEXT_LINES_PER_PAGE = 40


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
    page = decoder.render(0, until=until)
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


def measure_scans(
    engine: RapidOCR, scan_dpis: list[int], render_dpis: list[int] | None, conditions: list[str], pages: int, seed: int
) -> list[dict]:
    """One cell for each scan dpi, condition and render dpi (a PNG is fed as it is, at its scan dpi)."""
    cells = []
    for scan_dpi in scan_dpis:
        for condition in conditions:
            renders = [scan_dpi] if condition == "png" else (render_dpis or [scan_dpi])
            for render_dpi in renders:
                cell = ocr_cell(engine, condition, scan_dpi, render_dpi, pages, seed)
                cells.append(cell)
                print(
                    f"{condition:>8} scan {scan_dpi} render {cell['render_dpi']}: CER {cell['cer']:.2%} WER {cell['wer']:.2%} "
                    f"{cell['s_per_page']:.2f} s/page",
                    file=sys.stderr,
                )
    return cells


def argument_parser() -> argparse.ArgumentParser:
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
    return parser


def main() -> None:
    parser = argument_parser()
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

    cells = measure_scans(engine, args.dpi, args.render_dpi, conditions, args.pages, args.seed)
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
        "cost_model": COST_MODEL,
        "targets": build_targets(cells, text_layer, by_render, args.headline_dpi, args.memory_mb),
    }
    table = [
        (c["condition"], c["scan_dpi"], c["render_dpi"], c["cer"], c["wer"], c["lines_exact"], c["s_per_page"], c["cpu_s_per_page"])
        for c in cells
    ]
    emit(result, table, ("condition", "scan dpi", "render dpi", "CER", "WER", "lines exact", "s/page", "cpu s/page"))


if __name__ == "__main__":
    main()
