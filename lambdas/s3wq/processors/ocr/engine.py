"""RapidOCR on onnxruntime, loaded once per process on one thread, with the models its wheel ships and nothing downloaded.

RapidOCR 3.10 names each model (detection, angle classifier, recognition)
by a route in its ``default_models.yaml`` and, when it is given no
``model_path``, downloads the file into ``Global.model_root_dir`` (its
package's ``models/``) unless a file with the right SHA-256 is there. The
wheel ships the three files its default config routes to. So the engine is
built with each ``model_path`` set to the shipped file, after checking that it
is there with the digest RapidOCR expects: a config that routes elsewhere is a
one-line error at load, never a download. The recognition model must carry
its character list (RapidOCR would download a dictionary for one that does not).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime
from rapidocr import RapidOCR
from rapidocr.inference_engine.base import FileInfo, InferSession

from s3wq.errors import ProcessorNotFound
from s3wq.processors.ocr.cleaning import clean_text, clean_words
from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.line_reading import OcrLine, lines_of, reread_worst
from s3wq.processors.ocr.line_words import line_words
from s3wq.processors.ocr.page_flags import page_flags
from s3wq.processors.ocr.settings import current_settings

# Over RapidOCR's config.yaml, as bench/ocr.py measured them: one thread (a page is one
# core's work; parallelism comes from more workers), onnxruntime's memory arena on (faster,
# and the peak RSS stayed ~1.2 GB), and detection on the page's long side at 1280 px
# (``max``) instead of the short side at 736 (``min``), which read small print better.
ENGINE_PARAMS: dict[str, Any] = {
    "Global.log_level": "error",  # its warning for a page with no text would repeat, per page, what the record says
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    "EngineConfig.onnxruntime.enable_cpu_mem_arena": True,
    "Det.limit_type": "max",
    "Det.limit_side_len": 1280,
}
_TASKS = ("Det", "Cls", "Rec")
# RapidOCR drops a line scoring below its text_score (0.5) before anyone sees it: the page is read with none, so that such a line can
# be read again (line_reading.py), and what still scores below it is dropped after.
_TEXT_SCORE = 0.5


class ModelNotShipped(ProcessorNotFound):
    """RapidOCR's config routes to a model its installed wheel does not hold: it would download it."""


@dataclass(frozen=True)
class ReadLine:
    """One line as the engine read it (again, where it first read as garbage), in points from the page's top-left."""

    text: str
    score: float
    box: Box
    reread: bool = False


@dataclass(frozen=True)
class PageReading:
    """What the engine read on one page.

    ``confidence``: the mean score of its lines (None: none read). ``words``: each word with its box in points, its size (its
    line's height) and confidence, cleaned of other scripts; ``read_lines``: each line's text, score and box, in the engine's
    order (layout/ puts them in reading order); the flags, for a page read poorly.
    """

    confidence: float | None
    words: list[Word] = field(default_factory=list)
    read_lines: list[ReadLine] = field(default_factory=list)
    low_confidence: bool = False
    handwriting: bool = False
    unevenness: float | None = None  # how unevenly its letters stand, in line heights (page_flags.py); None: too few measured


def _shipped_model(config: Any, task: str) -> Path:
    """The file RapidOCR's ``config`` uses for ``task``, checked to be in its package as RapidOCR expects it."""
    part = config[task]
    info = InferSession.get_model_url(
        FileInfo(
            engine_type=part.engine_type,
            ocr_version=part.ocr_version,
            task_type=part.task_type,
            lang_type=part.lang_type,
            model_type=part.model_type,
        )
    )
    url, digest = info["model_dir"], info["SHA256"]
    path = Path(config.Global.model_root_dir) / Path(url).name
    version = importlib.metadata.version("rapidocr")
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        raise ModelNotShipped(
            f"rapidocr {version} would download its {task} model {Path(url).name} (not in its package, or changed): "
            f"the ocr processor uses only the models its wheel ships; reinstall rapidocr (pip install --force-reinstall 's3wq[ocr]')"
        )
    return path


def _check_character_list(rec_model: Path) -> None:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(rec_model), sess_options=options, providers=["CPUExecutionProvider"])
    if "character" not in session.get_modelmeta().custom_metadata_map:
        raise ModelNotShipped(
            f"the recognition model {rec_model.name} carries no character list: rapidocr would download a dictionary; "
            "the ocr processor uses only what its wheel ships"
        )


@functools.cache
def load_engine() -> RapidOCR:
    """This process's engine, built on first use; raise ModelNotShipped where RapidOCR would download anything."""
    config = RapidOCR(params=ENGINE_PARAMS).cfg  # reads the config only: RapidOCR loads its models on first use
    models = {task: _shipped_model(config, task) for task in _TASKS}
    _check_character_list(models["Rec"])
    engine = RapidOCR(params={**ENGINE_PARAMS, **{f"{task}.model_path": str(path) for task, path in models.items()}})
    cv2.setNumThreads(1)  # RapidOCR's resizing and box geometry run in OpenCV, which would use every core
    return engine


class PageNotRead(Exception):
    """The engine failed on one page (RapidOCR's ResizeImgError for a strip too thin to detect on, say): that page's error, not the group's."""


def _recognised(pixels: np.ndarray) -> Any:
    """RapidOCR's reading of a page with each character's box; raise PageNotRead, in one line, where the engine fails on it."""
    engine = load_engine()  # outside the try: a model that cannot load is no page's fault
    try:
        # Every option is given each time: RapidOCR keeps what a call set (a line's second reading sets use_det=False).
        return engine(pixels, use_det=True, use_cls=True, use_rec=True, return_word_box=True, return_single_char_box=True, text_score=0.0)
    except MemoryError:
        raise  # the process is short of memory: the attempt fails and is retried, as for any other group
    except Exception as exc:  # whatever the engine raises on one page's pixels
        message = " ".join(str(exc).split())
        raise PageNotRead(f"OCR failed: {type(exc).__name__}: {message}" if message else f"OCR failed: {type(exc).__name__}") from exc


def _grey(pixels: np.ndarray) -> np.ndarray:
    return pixels if pixels.ndim == 2 else cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY)


def read_page(pixels: np.ndarray, dpi: float, origin: tuple[float, float] = (0.0, 0.0)) -> PageReading:
    """OCR one page, an 8-bit grey (H, W) or RGB (H, W, 3) array rendered at ``dpi``, whose top-left lies at ``origin`` (points) on
    the page; raise PageNotRead, in one line, where the engine fails on it."""
    result = _recognised(pixels)
    grey = _grey(pixels)
    lines = [line for line in reread_worst(load_engine(), grey, lines_of(result)) if line.score >= _TEXT_SCORE]
    scripts = current_settings().scripts
    words: list[Word] = []
    spaced: list[OcrLine] = []
    for line in lines:
        respaced, line_words_ = line_words(grey, line, dpi, origin)
        spaced.append(respaced)
        words += clean_words(line_words_, scripts)
    flags = page_flags(grey, lines)
    scale = 72.0 / dpi
    texts = [clean_text(line.text, scripts) for line in spaced]
    return PageReading(
        confidence=flags.confidence,
        words=words,
        read_lines=[
            ReadLine(
                text=text,
                score=round(line.score, 4),
                box=Box(
                    origin[0] + line.box[0] * scale,
                    origin[1] + line.box[1] * scale,
                    origin[0] + line.box[2] * scale,
                    origin[1] + line.box[3] * scale,
                ),
                reread=line.reread,
            )
            for line, text in zip(spaced, texts)
        ],
        low_confidence=flags.low_confidence,
        handwriting=flags.handwriting,
        unevenness=flags.unevenness,
    )
