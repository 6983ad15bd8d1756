"""The systems bench/doc_quality.py compares, each reading the whole corpus into one output text per document.

* the ``ocr`` processor of a source tree (this one, or an earlier revision
  unpacked by ``git archive``), run by doc_processor_run.py in a child
  process of the OCR venv with PYTHONPATH at that tree's lambdas/; a
  document's output is its record's ``markdown`` where there is one, else
  its ``text``. One group per kind of document, so each kind is timed apart;
* Tesseract 5 (Debian's ``tesseract-ocr``): every page rendered by pypdfium2
  at 200 dpi, then ``tesseract PAGE.png OUT --psm 3 -l eng`` (fully
  automatic page segmentation, its default), one thread, its core-seconds
  its own (``os.wait4``) whatever runs beside it. It never reads a
  text layer, as Tesseract itself does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from doc_corpus import DocKind, Document
from doc_scans import render, tesseract_env
from ocr_venv import REPO_ROOT

TESSERACT_DPI = 200
TESSERACT_PSM = 3
PROCESSOR_TIMEOUT_SECONDS = 3600
TESSERACT_PAGE_SECONDS = 120
THROUGHPUT = "throughput"


class SystemFailed(Exception):
    """A system could not be run at all (not one document's error): the message says why."""


@dataclass
class SystemRun:
    """What one system read: its output per document, and the core-seconds and wall seconds per group (a kind, or the throughput run)."""

    outputs: dict[str, str] = field(default_factory=dict)
    core_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    description: dict = field(default_factory=dict)


def unpack_revision(revision: str, into: Path) -> Path:
    """``revision``'s lambdas/ (``git archive``) unpacked under ``into``: the tree the "before" processor is imported from."""
    archive = into / "tree.tar"
    command = ["git", "archive", "--format=tar", f"--output={archive}", revision, "lambdas"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode:
        hint = (
            "a shallow clone lacks it: git fetch --unshallow" if "not a valid" in done.stderr or "unknown revision" in done.stderr else ""
        )
        raise SystemFailed(f"git archive {revision} failed ({done.stderr.strip()}){'; ' + hint if hint else ''}")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "lambdas"


def output_of(record: dict) -> str:
    return record.get("markdown") or record.get("text") or ""


def run_processor(lambdas: Path, corpus: Path, documents: list[Document], throughput_file: str) -> SystemRun:
    """The processor whose package is under ``lambdas``, over every document, one group per kind (and one for the throughput PDF)."""
    by_kind: dict[str, list[Document]] = {}
    for document in documents:
        by_kind.setdefault(str(document.kind), []).append(document)
    with tempfile.TemporaryDirectory(prefix="doc-quality-") as folder:
        groups = [{"name": kind, "paths": [str(corpus / d.file) for d in docs]} for kind, docs in by_kind.items()]
        groups.append({"name": THROUGHPUT, "paths": [str(corpus / throughput_file)]})
        spec = Path(folder) / "spec.json"
        spec.write_text(json.dumps({"workspace": str(Path(folder) / "ws"), "groups": groups}))
        env = {**os.environ, "PYTHONPATH": str(lambdas), "OMP_NUM_THREADS": "1"}
        env.pop("VIRTUAL_ENV", None)
        runner = Path(__file__).with_name("doc_processor_run.py")
        done = subprocess.run(
            [sys.executable, str(runner), str(spec)], capture_output=True, text=True, env=env, timeout=PROCESSOR_TIMEOUT_SECONDS
        )
    if done.returncode:
        raise SystemFailed(f"the processor of {lambdas} failed: {done.stderr.strip()[-2000:]}")
    report = json.loads(done.stdout)
    run = SystemRun(description={"s3wq": report["s3wq"], "load_seconds": report["load_seconds"]})
    names = {str(corpus / d.file): d.name for d in documents}
    for group in report["groups"]:
        run.core_seconds[group["name"]] = group["core_seconds"]
        run.wall_seconds[group["name"]] = group["wall_seconds"]
        for record in group["records"]:
            if record["source"] in names:
                run.outputs[names[record["source"]]] = output_of(record)
                if record.get("error"):
                    run.errors[names[record["source"]]] = record["error"]
    return run


def tesseract_page(image_path: Path) -> tuple[str, float]:
    """Tesseract's text of one page image, and the core-seconds its process took (``os.wait4``'s account of that child alone)."""
    command = [
        "tesseract",
        str(image_path),
        str(image_path.with_suffix("")),
        "--psm",
        str(TESSERACT_PSM),
        "-l",
        "eng",
        "--dpi",
        str(TESSERACT_DPI),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=tesseract_env())
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        process.returncode = process.returncode if process.returncode is not None else 0
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if os.waitstatus_to_exitcode(status):
        raise SystemFailed(f"tesseract failed on a page: {stderr.strip()[-500:]}")
    return image_path.with_suffix(".txt").read_text().replace("\f", "").strip(), usage.ru_utime + usage.ru_stime


def tesseract_document(corpus: Path, document: Document, folder: Path) -> tuple[str, float, float]:
    """One document read by Tesseract: its text, core-seconds (this thread's render and Tesseract's) and wall seconds."""
    started, cpu = time.perf_counter(), time.thread_time()
    pages, tesseract_cpu = [], 0.0
    for number, image in enumerate(render((corpus / document.file).read_bytes(), TESSERACT_DPI)):
        path = folder / f"{document.name}-{number}.png"
        image.save(path)
        text, seconds = tesseract_page(path)
        pages.append(text)
        tesseract_cpu += seconds
    return "\n\n".join(pages), time.thread_time() - cpu + tesseract_cpu, time.perf_counter() - started


def run_tesseract(corpus: Path, documents: list[Document], workers: int = 1) -> SystemRun:
    """Tesseract over every page of every document at 200 dpi, ``workers`` documents at a time (each page's account is its own)."""
    run = SystemRun(
        description={"version": tesseract_version(), "dpi": TESSERACT_DPI, "psm": TESSERACT_PSM, "threads": "OMP_THREAD_LIMIT=1"}
    )
    with tempfile.TemporaryDirectory(prefix="doc-quality-tesseract-") as folder, ThreadPoolExecutor(max_workers=workers) as pool:
        read = list(pool.map(lambda document: tesseract_document(corpus, document, Path(folder)), documents))
    for document, (text, core_seconds, wall_seconds) in zip(documents, read):
        run.outputs[document.name] = text
        kind = str(document.kind)
        run.core_seconds[kind] = run.core_seconds.get(kind, 0.0) + core_seconds
        run.wall_seconds[kind] = run.wall_seconds.get(kind, 0.0) + wall_seconds
    return run


def tesseract_version() -> str:
    try:
        done = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        raise SystemFailed("tesseract is not installed (Debian: apt-get install tesseract-ocr)") from None
    return (done.stdout or done.stderr).splitlines()[0].strip()


def pages_by_kind(documents: list[Document]) -> dict[str, int]:
    pages: dict[str, int] = {}
    for document in documents:
        pages[str(document.kind)] = pages.get(str(document.kind), 0) + document.pages
    return pages


def image_only_kinds() -> list[str]:
    return [str(kind) for kind in DocKind if kind.image_only]
