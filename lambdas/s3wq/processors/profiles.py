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
    # cannot read falls back to ocr's CPU path), so their worker installs the same pinned file. The worker waits on the
    # model rather than computing; its memory is the ocr engine's, which a fallback page loads (and auto's CPU pages use).
    # TODO(#30): measured figures for memory and group size.
    "vlm": ProcessorProfile(
        extra="vlm", requirements_file="requirements-ocr.txt", worker_memory_mb=1769, group_size=5, module="s3wq.processors.vlm.processor"
    ),
    "auto": ProcessorProfile(
        extra="vlm", requirements_file="requirements-ocr.txt", worker_memory_mb=1769, group_size=5, module="s3wq.processors.vlm.processor"
    ),
}
