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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime
from rapidocr import RapidOCR
from rapidocr.inference_engine.base import FileInfo, InferSession

from s3wq.errors import ProcessorNotFound
from s3wq.processors.ocr.reading_order import printed_lines

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


class ModelNotShipped(ProcessorNotFound):
    """RapidOCR's config routes to a model its installed wheel does not hold: it would download it."""


@dataclass(frozen=True)
class PageReading:
    """What the engine read on one page: its printed lines, top to bottom, and the mean confidence of its boxes (None: no box)."""

    lines: list[str]
    confidence: float | None


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


def read_page(pixels: np.ndarray) -> PageReading:
    """OCR one page, an 8-bit grey (H, W) or RGB (H, W, 3) array; raise PageNotRead, in one line, where the engine fails on it."""
    engine = load_engine()  # outside the try: a model that cannot load is no page's fault
    try:
        result = engine(pixels)
    except MemoryError:
        raise  # the process is short of memory: the attempt fails and is retried, as for any other group
    except Exception as exc:  # whatever the engine raises on one page's pixels
        message = " ".join(str(exc).split())
        raise PageNotRead(f"OCR failed: {type(exc).__name__}: {message}" if message else f"OCR failed: {type(exc).__name__}") from exc
    scores = [float(s) for s in (result.scores or ())]
    return PageReading(
        lines=[line for line in printed_lines(result.boxes, result.txts) if line.strip()],
        confidence=round(sum(scores) / len(scores), 4) if scores else None,
    )
