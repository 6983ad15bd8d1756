"""What a built-in processor that needs an extra asks of a deployment: the extra, its pinned file, the worker's size.

One table, read by the CDK construct (s3wq_cdk's settings: the worker's
memory and group size when the user sets none, and the pinned file its
container image installs), by the local cloud (the same file, built for
this machine) and by loading.py (which names are built-ins that need an
extra, and which extra). A processor that needs no extra has no entry.
Plain data: no CDK.

A new built-in with an extra is: its module (``processors/<name>/``), its
extra in pyproject.toml, its pinned ``requirements-<name>.txt`` at the
checkout's root with a link to it in s3wq_cdk's ``requirements/`` (shipped
in the wheel), and an entry here (docs/processors.md, "Adding a built-in
processor that needs an extra").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessorProfile:
    """What a built-in processor needs on Lambda: its extra's pinned requirements, and the worker's size when the user sets none."""

    extra: str  # pip install 's3wq[<extra>]'
    requirements_file: (
        str  # the extra pinned: at the checkout's root, shipped in s3wq_cdk's requirements/, installed beside requirements.txt
    )
    worker_memory_mb: int
    group_size: int
    module: str = ""  # the module that defines the processor function (of the profile's name); "": s3wq.processors.<name>.processor
    # An execution's workers (the Distributed Map's concurrency) when the user sets none: for a processor whose pages wait
    # on a model, what one model instance serves well (a deployment that starts N instances runs N times as many). None:
    # s3wq's own default.
    workers: int | None = None


PROCESSOR_PROFILES: dict[str, ProcessorProfile] = {
    # The ocr extra with s3wq's requirements is 341 MB installed for manylinux
    # aarch64 (docs/performance.md), over a zip's 250 MB: its worker is always
    # the container image. Measured (bench/ocr.py): 2.25 core-seconds a
    # scanned page on one core (2.4 below, for margin), peak RSS ~1.3 GB. 1769 MB is Lambda's one full vCPU (the OCR runs on one
    # thread, so more memory would buy idle cores) with ~0.5 GB to spare.
    # A group is documents, not pages: at a 20-page scan, 5 of them are
    # 5 x 20 x 2.4 = 240 s, about a quarter of the 890 s a 900 s invocation
    # leaves a run (less its 10 s margin), so a worker finishes several groups
    # per invocation and a retry repeats little. A 100-page scan alone is the
    # same 240 s; longer ones are read as far as their share of the run goes, the rest
    # an input error (processors/ocr/time_shares.py), the group done.
    "ocr": ProcessorProfile(extra="ocr", requirements_file="requirements-ocr.txt", worker_memory_mb=1769, group_size=5),
    # vlm and auto: the vlm extra is the ocr extra's packages (ocr's decoder opens and renders the pages; a page the model
    # cannot read falls back to ocr's CPU path), so their worker installs the same pinned file.
    # Sized for waiting, not computing. A vlm worker spends most of its time waiting on the model with S3WQ_VLM_IN_FLIGHT
    # pages (16) in flight; what it computes is each page's render and its base64 (tens of ms), and, for a page the model
    # could not read, ocr's CPU path: ~2.4 s on one core at a peak RSS of ~1.3 GB. That fallback sets the floor, not the
    # waiting: 1769 MB (Lambda's one full vCPU) holds the engine, the 16 pages in flight (under 20 MB) and the host with
    # ~0.4 GB to spare, and below it a fallback page would run on a fraction of a core. auto runs the CPU path on most of
    # its pages, so it is the ocr worker (1769 MB, one vCPU: the engine runs one thread), the model only for hard pages.
    # The timeout stays Lambda's 900 s (settings.LAMBDA_MAX_TIMEOUT_SECONDS): a waiting worker costs its memory by the
    # second either way, and a long invocation starts the image and the processor host once for many groups.
    # Group size 5, as ocr: five 20-page documents are 100 pages; at 16 in flight and ~10 s a model page (an L4 with
    # olmOCR's 7B model, answers of ~1,000 tokens), about 60 s, so a worker finishes several groups an invocation and a
    # retry repeats little; auto's CPU pages make it ocr's 240 s at worst.
    # Workers (the Map's concurrency): the model is the bottleneck, not Lambda. One L4 (24 GB) batches ~50 pages at once:
    # beside the ~9 GB of FP8 weights its KV cache holds ~175,000 tokens at 56 KB each, ~3,500 a page (the image's ~1,700
    # and the answer). vlm runs 4 workers x 16 in flight per model instance, which keeps it full (vLLM queues the few
    # beyond, well inside S3WQ_VLM_REQUEST_TIMEOUT); an auto worker reads ~0.4 pages/s on its core and sends the model perhaps
    # 1 in 10 of them, so 16 auto workers load one instance less than 4 vlm workers do.
    # Measured against the stand-in (bench/vlm.py, 2 s a page, 48 pages; docs/performance.md): 0.43 pages/s with one page in
    # flight, 2.9 with 16 and 4.8 with 32, a worker's peak RSS 245 MB with them (the engine not loaded: no fallback), and
    # ~0.13 core-seconds a page of its own (the render and the PNG), which bounds one worker near 7 pages/s whatever the model.
    # auto escalated 62 % of the pages of #29's corpus, which has a table on most pages (40 of 65); a corpus of plain text
    # layers and clean scans escalates few.
    "vlm": ProcessorProfile(
        extra="vlm",
        requirements_file="requirements-ocr.txt",
        worker_memory_mb=1769,
        group_size=5,
        module="s3wq.processors.vlm.processor",
        workers=4,
    ),
    "auto": ProcessorProfile(
        extra="vlm",
        requirements_file="requirements-ocr.txt",
        worker_memory_mb=1769,
        group_size=5,
        module="s3wq.processors.vlm.processor",
        workers=16,
    ),
}
