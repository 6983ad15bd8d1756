"""What a processor folder must hold, and may not: one rule for ``s3wq work --processor-dir`` and ``cdk deploy -c processorDir``.

The folder goes first on the import path (``work``) or to the root of the
worker's asset (Lambda), so it must hold the top-level module that
``module:function`` names, and nothing named like s3wq's own package, which
it would shadow.
"""

from __future__ import annotations

from pathlib import Path

# Names a processor folder may not hold at its top.
SHADOWING_NAMES = ("s3wq", "s3wq.py")


def top_module(spec: str) -> str:
    """``pkg`` of ``pkg.mod:fn``."""
    return spec.split(":", 1)[0].split(".", 1)[0]


def holds_module(folder: Path, spec: str) -> bool:
    """Whether ``folder`` holds the top-level module of ``spec``, as ``top.py`` or a ``top/`` package."""
    top = top_module(spec)
    return (folder / f"{top}.py").is_file() or (folder / top).is_dir()


def shadowing_name(folder: Path) -> str | None:
    """The first of SHADOWING_NAMES that ``folder`` holds, or None."""
    return next((name for name in SHADOWING_NAMES if (folder / name).exists()), None)
