"""What every benchmark shares: the machine's description, targets, output, the local S3 endpoint.

Each benchmark prints one JSON object on stdout (so ``> result.json`` keeps
it) and a readable table on stderr.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import urllib.request
from collections.abc import Iterable, Sequence
from typing import Any

# The repository root is computed in ocr_venv.py alone: that module is also loaded by its file path
# (tests/ocr/conftest.py), where bench/ is not on sys.path, so it can import no sibling of its own.
from ocr_venv import REPO_ROOT

# The workspace prefix inside each benchmark bucket.
WORKSPACE_PREFIX = "ws"


def machine() -> dict:
    return {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": f"{platform.system()} {platform.machine()}",
        **library_version(),
    }


def library_version() -> dict:
    """The commit measured, and whether the library had uncommitted changes then."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    changes = git("status", "--porcelain", "--", "lambdas", "requirements.txt")
    return {"commit": commit, "library_changed_since_commit": None if changes is None else bool(changes)}


def peak_rss_mb() -> float:
    """This process's peak resident set so far, in MiB.

    Linux carries ``ru_maxrss`` across exec: a child started with spawn or
    subprocess (fork, then exec) reports at least its parent's RSS at the
    fork. ``VmHWM`` is the peak of this process image alone, so it is read
    first; ``getrusage`` is the fallback where there is no /proc.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def target(name: str, measured: float | None, limit: float, *, at_most: bool = True, unit: str = "") -> dict:
    """One target beside its measured value; ``met`` is None when nothing was measured."""
    met = None if measured is None else (measured <= limit if at_most else measured >= limit)
    return {"target": name, "limit": f"{'<=' if at_most else '>='} {limit:g}{unit}", "measured": measured, "met": met}


def emit(result: dict, table: Iterable[Sequence[Any]] = (), header: Sequence[str] = ()) -> None:
    """The JSON object on stdout; the table and the targets on stderr."""
    rows = [list(map(str, header))] + [[_cell(v) for v in row] for row in table] if header else []
    if rows:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for n, row in enumerate(rows):
            print("  ".join(cell.rjust(w) if n and i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))), file=sys.stderr)
    for t in result.get("targets", []):
        verdict = {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
        print(f"target {t['target']} {t['limit']}: {t['measured']} -- {verdict}", file=sys.stderr)
    print(json.dumps(result))
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def reset_server(endpoint: str) -> None:
    """Empty the local S3 server between runs (moto's reset API), so no run pays for an earlier run's objects."""
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=60).close()


def positive_ints(text: str) -> list[int]:
    """``"8,16,32"`` -> [8, 16, 32], for argparse."""
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 1:
        raise ValueError(f"expected positive integers separated by commas, got {text!r}")
    return values
