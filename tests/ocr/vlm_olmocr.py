"""olmocr's own pipeline beside the vlm processor's olmocr-exact parts, run in the OCR venv:
``python vlm_olmocr.py OLMOCR_DIR OUTDIR``.

Imports the published olmocr (installed by the ``published_olmocr`` fixture;
the packages its pipeline imports and these checks never call are stubbed,
as bench/olmocr_queue.py stubs them; pypdf, Pillow and poppler are real),
writes a small PDF with reportlab, and prints as JSON what each side made of
it: each page's request body and image (olmocr's pdftoppm render, ours by
the decoder), the turned images, replies from a real HTTP server judged by
olmocr's try_single_page and by judge_reply, Dolma documents and Markdown
paths. test_vlm_olmocr.py asserts on it.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import http.server
import importlib
import io
import json
import logging
import os
import random
import sys
import threading
import time
import types
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from reportlab.lib.pagesizes import A4, landscape, letter
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from s3wq.processors.ocr.decoding import Decoder, ScannedPage
from s3wq.processors.ocr.settings import OcrSettings
from s3wq.processors.vlm import query
from s3wq.processors.vlm.answer import PageAnswer, judge_reply
from s3wq.processors.vlm.dolma import DolmaPage, dolma_document, markdown_path

MODEL = "allenai/olmOCR-2-7B-1025-FP8"
LONGEST_SIDE = 1288
# The pages drawn: (size in points, /Rotate). Letter, A4 across, a page turned by its /Rotate, and a strip.
PAGES = [(letter, 0), (landscape(A4), 0), (letter, 90), ((300, 100), 0)]
# DejaVu, embedded, so that poppler and pdfium draw the same glyphs (each substitutes its own for a base-14 font).
FONT = "DejaVuSans.ttf"
ANSWER = "---\nprimary_language: en\nis_rotation_valid: true\nrotation_correction: 0\nis_table: false\nis_diagram: false\n---\nHello"


def olmocr_pipeline(install_dir: str) -> types.ModuleType:
    """``olmocr.pipeline``, with what it imports but these checks never call stubbed."""
    sys.path.insert(0, install_dir)

    def stub(name: str, **attributes: Any) -> None:
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__dict__.update(attributes)

    stub("httpx")
    stub("huggingface_hub", snapshot_download=None)
    stub("lingua", Language=types.SimpleNamespace(ENGLISH="en"), LanguageDetectorBuilder=None)
    stub("ftfy", fix_text=lambda text: text)
    stub("zstandard")
    stub("google.cloud")
    stub("google.cloud.storage", Client=None)
    sys.modules["google.cloud"].storage = sys.modules["google.cloud.storage"]  # type: ignore[attr-defined]
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # its import makes two S3 clients, never used here
    pipeline = importlib.import_module("olmocr.pipeline")
    for name in ("olmocr.pipeline", "olmocr.train.front_matter", "vllm"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # its warnings name each failed attempt, as meant
    return pipeline


def write_pdf(path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from doc_fonts import font_file  # the benchmarks' own finder (.ci/run installs the fonts)

    pdfmetrics.registerFont(TTFont("DejaVu", str(font_file(FONT))))
    pdf = canvas.Canvas(str(path))
    for size, rotation in PAGES:
        width, height = size
        pdf.setPageSize(size)
        pdf.setPageRotation(rotation)
        pdf.setFillColorRGB(0.8, 0.1, 0.1)
        pdf.rect(20, 20, width / 3, height / 4, fill=1)
        pdf.setFillColorRGB(0, 0, 0)
        pdf.setFont("DejaVu", 11)
        for line in range(int(height // 16) - 2):
            pdf.drawString(12, height - 24 - 16 * line, f"Line {line} of the page: words set as a document sets them, 3.14")
        pdf.showPage()
    pdf.save()


def pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def image_of(body: dict) -> bytes:
    url = body["messages"][0]["content"][1]["image_url"]["url"]
    return base64.b64decode(url.removeprefix("data:image/png;base64,"))


def without_image(body: dict) -> dict:
    copy = json.loads(json.dumps(body))
    copy["messages"][0]["content"][1]["image_url"]["url"] = "IMAGE"
    return copy


def compare_images(theirs: bytes, ours: bytes) -> dict:
    """Their sizes, and how far apart the pixels both have are (the most apart of the channels, of 255): a pixel's, a
    4 x 4 block's mean, and the share of pixels darker than mid grey (the ink) in each."""
    a, b = pixels(theirs), pixels(ours)
    height, width = min(a.shape[0], b.shape[0]) // 4 * 4, min(a.shape[1], b.shape[1]) // 4 * 4
    a, b = a[:height, :width], b[:height, :width]
    difference = np.abs(a - b).max(axis=2)
    blocks = np.abs(
        a.reshape(height // 4, 4, width // 4, 4, 3).mean(axis=(1, 3)) - b.reshape(height // 4, 4, width // 4, 4, 3).mean(axis=(1, 3))
    )
    return {
        "olmocr_size": list(Image.open(io.BytesIO(theirs)).size),
        "our_size": list(Image.open(io.BytesIO(ours)).size),
        "mean_difference": float(difference.mean()),
        "share_far": float((difference > 64).mean()),
        "block_difference": float(blocks.max(axis=2).mean()),
        "ink": [float((a.max(axis=2) < 128).mean()), float((b.max(axis=2) < 128).mean())],
    }


async def pages_check(pipeline: types.ModuleType, pdf: Path) -> list[dict]:
    """Each page's request as olmocr's build_page_query makes it (temperature set as try_single_page sets it), and ours."""
    results = []
    until = time.monotonic() + 120
    with Decoder(OcrSettings()) as decoder:
        decoder.open(pdf.read_bytes(), "pdf", until)
        for index in range(len(PAGES)):
            attempt = 3 * index
            theirs = await pipeline.build_page_query(str(pdf), index + 1, LONGEST_SIDE, model_name=MODEL)
            theirs["temperature"] = pipeline.TEMPERATURE_BY_ATTEMPT[min(attempt, len(pipeline.TEMPERATURE_BY_ATTEMPT) - 1)]
            page = decoder.render(index, until, longest_side=LONGEST_SIDE, colour=True)
            assert isinstance(page, ScannedPage)
            ours = query.page_request(query.png_of(page.pixels), model=MODEL, temperature=query.temperature_for(attempt))
            result = {"same_body": without_image(theirs) == without_image(ours), "attempt": attempt}
            results.append({**result, **compare_images(image_of(theirs), image_of(ours))})
    return results


async def rotations_check(pipeline: types.ModuleType, pdf: Path) -> dict:
    """olmocr's turned page beside ours of olmocr's own upright PNG, pixel for pixel and byte for byte."""
    upright = image_of(await pipeline.build_page_query(str(pdf), 1, LONGEST_SIDE))
    result = {}
    for rotation in (90, 180, 270):
        theirs = image_of(await pipeline.build_page_query(str(pdf), 1, LONGEST_SIDE, image_rotation=rotation))
        ours = query.rotated(upright, rotation)
        same = pixels(theirs).shape == pixels(ours).shape and bool((pixels(theirs) == pixels(ours)).all())
        result[str(rotation)] = {"same_pixels": same, "same_bytes": theirs == ours}
    result["0"] = {"unchanged": query.rotated(upright, 0) is upright}
    return result


def completion(content: Any = ANSWER, finish: Any = "stop", **usage: Any) -> dict:
    counts = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500, **usage}
    return {"choices": [{"finish_reason": finish, "message": {"role": "assistant", "content": content}}], "usage": counts}


def replies() -> list[Any]:
    """Replies a server may send: good, cut short, too long, turned, unparseable, and not completions at all."""
    turned = ANSWER.replace("is_rotation_valid: true", "is_rotation_valid: false").replace("correction: 0", "correction: 90")
    no_usage = completion()
    del no_usage["usage"]
    return [
        completion(),
        completion(finish="length"),
        completion(total_tokens=20000),
        completion(total_tokens=16384),
        completion(total_tokens=16385),
        completion(content=turned),
        completion(content="Hello, no front matter"),
        completion(content=None),
        completion(prompt_tokens=None, completion_tokens=7),
        completion(prompt_tokens="12"),
        completion(prompt_tokens=12.0, completion_tokens=True),
        {"choices": [{"finish_reason": "stop", "message": {"content": ANSWER}}], "usage": {"total_tokens": 10}},
        completion(total_tokens=None),
        {k: v for k, v in completion().items() if k != "choices"} | {"choices": []},
        {"choices": [{"message": {"content": ANSWER}}], "usage": completion()["usage"]},
        no_usage,
        completion(total_tokens="1500"),
    ]


def serve(bodies: list[Any], received: list[dict]) -> http.server.ThreadingHTTPServer:
    """A real chat-completions server on a free port: each POST gets the next body."""
    queue = list(bodies)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps(queue.pop(0)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def replies_check(pipeline: types.ModuleType, pdf: Path) -> list[dict]:
    """Each reply as olmocr's try_single_page judges it (over HTTP) and as judge_reply does, and the bodies it posted."""
    received: list[dict] = []
    server = serve(replies(), received)
    # The page is rendered small: its image is not what is compared here (pages_check compares it), and each attempt renders it.
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    args = types.SimpleNamespace(server=url, model=MODEL, target_longest_image_dim=256, guided_decoding=False)
    results = []
    try:
        for attempt, reply in enumerate(replies()):
            theirs = await pipeline.try_single_page(args, "s3://bucket/doc.pdf", str(pdf), 2, attempt, 0)
            ours = judge_reply(reply)
            olmocr = None
            if theirs is not None:
                fields = ("input_tokens", "output_tokens", "is_valid")
                olmocr = {"response": asdict(theirs.response), **{name: getattr(theirs, name) for name in fields}}
            body = received[-1]
            results.append(
                {
                    "olmocr": olmocr,
                    "ours": {**asdict(ours), "answer": asdict(ours.answer) if ours.answer else None},
                    "attempt": attempt,
                    "same_body": without_image(body)
                    == without_image(query.page_request(b"", model=MODEL, temperature=query.temperature_for(attempt))),
                }
            )
    finally:
        server.shutdown()
        server.server_close()
    return results


def dolma_cases(rng: random.Random) -> list[list[tuple]]:
    """Pages as (page_num, natural_text, language, rotation valid, rotation, table, diagram, in, out, fallback)."""
    texts = [None, "", "Hello", "two\nlines", "  spaced  ", "é 中文 \u2028", "x" * 50]
    cases: list[list[tuple]] = [[], [(1, None, None, True, 0, False, False, 0, 0, True)]]
    for _ in range(60):
        cases.append(
            [
                (
                    number,
                    rng.choice(texts),
                    rng.choice([None, "en", "de"]),
                    rng.random() < 0.8,
                    rng.choice([0, 90, 180, 270]),
                    rng.random() < 0.3,
                    rng.random() < 0.3,
                    rng.randrange(3000),
                    rng.randrange(3000),
                    rng.random() < 0.2,
                )
                for number in rng.sample(range(1, 30), rng.randrange(1, 8))
            ]
        )
    return cases


def dolma_check(pipeline: types.ModuleType) -> list[dict]:
    """Each case's document by olmocr's build_dolma_document (from its own PageResults) and by dolma_document."""
    from olmocr.prompts import PageResponse

    today = datetime.date.today()
    results = []
    for case in dolma_cases(random.Random(30)):
        theirs_pages, our_pages = [], []
        for number, text, language, valid, rotation, table, diagram, tokens_in, tokens_out, fallback in case:
            response = PageResponse(language, valid, rotation, table, diagram, text)
            theirs_pages.append(pipeline.PageResult("s3://b/d.pdf", number, response, tokens_in, tokens_out, fallback, True))
            answer = PageAnswer(language, valid, rotation, table, diagram, text)
            our_pages.append(DolmaPage(number, answer, tokens_in, tokens_out, fallback))
        theirs = pipeline.build_dolma_document("s3://b/d.pdf", theirs_pages)
        ours = dolma_document("s3://b/d.pdf", our_pages, today=today)
        dates = None
        if theirs is not None and ours is not None:
            dates = [ours["added"], ours["created"]]
            theirs["added"], theirs["created"] = ours["added"], ours["created"]
        results.append({"same": theirs == ours, "none": ours is None, "dates": dates, "today": today.isoformat()})
    return results


# olmocr's own cases (its tests/test_pipeline.py, TestMarkdownPathHandling), then tarballs, odd names and hostile ones.
OLMOCR_MARKDOWN_CASES = [
    "/home/ubuntu/test_documents/subfolder/test_document.pdf",
    "s3://my-bucket/documents/subfolder/test_document.pdf",
    "documents/subfolder/test_document.pdf",
    "documents/../../../etc/passwd.pdf",
]
MORE_MARKDOWN_CASES = [
    "s3://bucket/a/b.pdf",
    "/data/x.tar.gz::inner/dir/page.pdf",
    "archive.tar::a.pdf",
    "s3://b/bundle.tgz::../../escape.pdf",
    "s3://b/t.tar.gz::/abs/inner.pdf",
    "s3://bucket/",
    "s3://bucket",
    "s3://bucket//double//slash.pdf",
    "../../up.pdf",
    "./here/./file.pdf",
    "a/./b/../c.pdf",
    "no_extension",
    "dir/.pdf",
    "dir/a.b.c.pdf",
    "dir/..pdf",
    "s3://b/space name/é.pdf",
    "..",
    "/",
    "",
]


def markdown_check(pipeline: types.ModuleType) -> list[dict]:
    """get_markdown_path's part under ``WORKSPACE/markdown/`` beside markdown_path, for each case."""
    prefix = "WORKSPACE/markdown/"
    results = []
    for case in OLMOCR_MARKDOWN_CASES + MORE_MARKDOWN_CASES:
        theirs = pipeline.get_markdown_path("WORKSPACE", case)
        assert theirs.startswith(prefix), theirs
        results.append(
            {"case": case, "olmocr": theirs.removeprefix(prefix), "ours": markdown_path(case), "olmocrs_own": case in OLMOCR_MARKDOWN_CASES}
        )
    return results


def decoder_check(pdf: Path, out: Path) -> dict:
    """The decoder's longest side under a small pixel cap, and for image files (scaled up or down, grey or in colour)."""
    until = time.monotonic() + 120
    result: dict[str, Any] = {}
    with Decoder(OcrSettings(max_pixels=250_000)) as decoder:
        decoder.open(pdf.read_bytes(), "pdf", until)
        capped = decoder.render(0, until, longest_side=LONGEST_SIDE, colour=True)
        assert isinstance(capped, ScannedPage)
        result["capped"] = list(capped.pixels.shape)
    with Decoder(OcrSettings()) as decoder:
        for name, size, mode in [("small-grey", (300, 200), "L"), ("large-rgb", (2000, 3000), "RGB")]:
            image = Image.new(mode, size, 255 if mode == "L" else (255, 255, 255))
            image.paste(0 if mode == "L" else (200, 30, 30), (10, 10, size[0] // 2, size[1] // 2))
            data = io.BytesIO()
            image.save(data, format="PNG")
            decoder.open(data.getvalue(), "image", until)
            for colour in (False, True):
                page = decoder.render(0, until, longest_side=LONGEST_SIDE, colour=colour)
                assert isinstance(page, ScannedPage)
                result[f"{name}-{'colour' if colour else 'grey'}"] = list(page.pixels.shape)
        decoder.open(pdf.read_bytes(), "pdf", until)
        at_dpi = decoder.render(0, until)
        assert isinstance(at_dpi, ScannedPage)
        result["at_dpi"] = list(at_dpi.pixels.shape)
    return result


async def checks(pipeline: types.ModuleType, pdf: Path) -> dict:
    return {
        "pages": await pages_check(pipeline, pdf),
        "rotations": await rotations_check(pipeline, pdf),
        "replies": await replies_check(pipeline, pdf),
    }


def main(install_dir: str, out: Path) -> dict:
    pipeline = olmocr_pipeline(install_dir)
    from olmocr.prompts import build_no_anchoring_v4_yaml_prompt

    pdf = out / "pages.pdf"
    write_pdf(pdf)
    result = asyncio.run(checks(pipeline, pdf))
    result["prompt_equal"] = query.PROMPT == build_no_anchoring_v4_yaml_prompt()
    result["temperatures_equal"] = list(query.TEMPERATURES) == pipeline.TEMPERATURE_BY_ATTEMPT
    result["olmocr_version"] = importlib.import_module("olmocr.version").VERSION
    result["decoder"] = decoder_check(pdf, out)
    result["dolma"] = dolma_check(pipeline)
    result["markdown"] = markdown_check(pipeline)
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
