"""``s3wq export`` at a million records: its time and peak memory, to JSON Lines and Parquet, per input and per page.

Synthetic results are written straight into a local workspace (``--files`` result objects of ``--per-file`` ocr-shaped
records, two pages each), then each export runs as its own ``python -m s3wq export`` process, pyarrow on its
PYTHONPATH (bench/export_deps.py installs the ``parquet`` extra's pin), and its peak resident set is read from
``wait4``. A run at a tenth of the records beside it shows whether memory grows with the export (it should not).

    .venv/bin/python bench/export.py                   # 1,000 results of 1,000 records: a million
    .venv/bin/python bench/export.py --files 200       # 200,000 records
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import export_deps
from common import REPO_ROOT, emit, machine

from s3wq.store import LocalBackend, layout

# The runs, each (format, per).
RUNS = (("jsonl", "input"), ("parquet", "input"), ("parquet", "page"))


# Words the pages are drawn from, so that the text compresses as prose does, not as one phrase repeated.
WORDS = [
    f"{stem}{end}"
    for stem in ("inv", "rep", "sch", "tab", "mar", "dat", "pol", "eng", "rev", "cap")
    for end in ("oice", "ort", "edule", "le", "ket", "a", "icy", "ine", "iew", "ital")
]
WORDS_A_PAGE = 24


def record(group: str, position: int, rng: random.Random) -> dict:
    """An ocr record of two pages (~800 bytes as JSON): the shape docs/processors.md shows."""
    first = f"Page one of document {position}: " + " ".join(rng.choices(WORDS, k=WORDS_A_PAGE))
    second = f"Page two of {group[:8]}: " + " ".join(rng.choices(WORDS, k=WORDS_A_PAGE))
    text = f"{first}\n{second}"
    return {
        "id": f"{group}:{position}",
        "source": f"s3://bench-inputs/pdfs/{group[:2]}/doc-{position:05d}.pdf",
        "text": text,
        "attributes": {"pdf_page_numbers": [[0, len(first) + 1, 1], [len(first) + 1, len(text), 2]]},
        "metadata": {
            "bytes": 48211,
            "content_type": "application/pdf",
            "processor": {"name": "ocr", "version": "0.1.0"},
            "pages": [
                {"page": 1, "method": "text_layer", "route": "text_layer", "confidence": None, "seconds": 0.01},
                {"page": 2, "method": "ocr", "route": "ocr", "confidence": 0.91, "dpi": 200, "seconds": 2.1},
            ],
        },
    }


def fill(workspace: Path, files: int, per_file: int) -> float:
    """The workspace's results, written as workers would; the seconds it took."""
    started = time.perf_counter()
    backend = LocalBackend(str(workspace))
    rng = random.Random(31)
    for index in range(files):
        group = f"{index:040x}"
        backend.write(layout.result_key(group), "".join(json.dumps(record(group, n, rng)) + "\n" for n in range(per_file)).encode())
    return time.perf_counter() - started


def run_export(workspace: Path, out: Path, per: str, pyarrow: Path) -> dict:
    """One ``s3wq export`` in a process of its own: its seconds, peak RSS (MiB), output size and report."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "lambdas"), str(pyarrow)])}
    command = [sys.executable, "-m", "s3wq", "export", str(workspace), "--to", str(out), "--per", per, "--json", "--force"]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    stdout = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"export: s3wq export exited {child.returncode}")
    report = json.loads(stdout)
    return {
        "seconds": round(seconds, 1),
        # CPU the export itself spent: on a shared machine, what the wall-clock seconds would be with a core to itself.
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "rows": report["rows"],
        "rows_per_second": round(report["rows"] / seconds),
        "output_mb": round(out.stat().st_size / 2**20, 1),
    }


def measure(files: int, per_file: int, pyarrow: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="s3wq-export-bench-") as folder:
        workspace = Path(folder) / "ws"
        fill_seconds = fill(workspace, files, per_file)
        size = sum(p.stat().st_size for p in (workspace / "results").iterdir())
        runs = {}
        for export_format, per in RUNS:
            out = Path(folder) / f"out-{per}.{export_format}"
            runs[f"{export_format}/{per}"] = run_export(workspace, out, per, pyarrow)
            out.unlink()
        return {"records": files * per_file, "results_mb": round(size / 2**20, 1), "fill_seconds": round(fill_seconds, 1), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000, help="result objects (default 1000)")
    parser.add_argument("--per-file", type=int, default=1000, help="records in each (default 1000)")
    args = parser.parse_args()
    pyarrow = export_deps.ensure()
    sizes = [max(1, args.files // 10), args.files]
    results = [measure(files, args.per_file, pyarrow) for files in sizes]
    table = [
        (r["records"], name, run["rows"], run["seconds"], run["cpu_seconds"], run["rows_per_second"], run["peak_rss_mb"], run["output_mb"])
        for r in results
        for name, run in r["runs"].items()
    ]
    emit(
        {"benchmark": "export", "machine": machine(), "per_file": args.per_file, "sizes": results},
        table,
        ("records", "run", "rows", "seconds", "CPU s", "rows/s", "peak RSS MiB", "output MiB"),
    )


if __name__ == "__main__":
    main()
