"""``export``: a workspace's results gathered into one JSON Lines or Parquet file (:mod:`s3wq.ops.export` makes the rows)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from s3wq.cli.output import EXIT_OK, emit, printable
from s3wq.cli.workspace import open_workspace
from s3wq.ops.export import ExportReport, Per, export_rows
from s3wq.ops.export_files import ExportFormat, format_of, output_file
from s3wq.wording import plural

# Seconds between two progress lines on stderr.
PROGRESS_INTERVAL_SECONDS = 2.0
EXAMPLES = (
    "s3wq export s3://my-bucket/run1 --to run1.parquet                # one row per input (pip install 's3wq[parquet]')",
    "s3wq export ./ws --to pages.jsonl --per page                     # one row per page, its text and how it was read",
    "duckdb -c \"SELECT source, page, route FROM 'pages.parquet' WHERE confidence < 0.8\"",
)


def add_export(sub, command: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``export`` command's parser, made by ``command`` (the parser's own, with --json and -v)."""
    p = command(
        sub,
        "export",
        "Gather the workspace's results into one JSON Lines or Parquet file: one row per input, or per page.",
        *EXAMPLES,
    )
    p.add_argument("workspace", help="s3://bucket/prefix, or a local directory: s3wq's workspace or olmocr's")
    p.add_argument("--to", required=True, type=Path, metavar="FILE", help="the file to write: FILE.jsonl or FILE.parquet")
    p.add_argument("--format", choices=[f.value for f in ExportFormat], help="the file's format (default: from its suffix)")
    p.add_argument(
        "--per",
        choices=[p.value for p in Per],
        default=Per.INPUT.value,
        help="a row per input (default; the record's other fields in the JSON column extra) or per page "
        "(the text of each page's span, with its route, method, confidence and is_fallback where the record has them)",
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.epilog = (
        f"{p.epilog}\ncolumns:\n"
        "  id, source (the input), group, text, error, processor, processor_version, pages, extra (the rest, JSON);\n"
        "  --per page adds page, route, method, confidence, is_fallback"
    )
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    export_format = format_of(args.to, args.format)
    backend = open_workspace(args.workspace)
    started = time.monotonic()
    with output_file(args.to, export_format, Per(args.per), force=args.force) as writer:
        report = export_rows(backend, Per(args.per), writer.write, _progress(started))
    seconds = time.monotonic() - started
    if report.bad_lines:
        print(
            f"s3wq: warning: {plural(report.bad_lines, 'result line')} not a JSON object, skipped: "
            f"the first at {printable(report.first_bad_line)}",
            file=sys.stderr,
        )
    doc = {**report.to_json(), "to": str(args.to), "format": export_format.value, "per": args.per, "seconds": round(seconds, 2)}

    def human(d: dict) -> str:
        return (
            f"exported {plural(d['records'], 'record')} of {plural(d['results'], 'result')} as {plural(d['rows'], 'row')} "
            f"to {d['to']} ({d['format']}, {d['seconds']:.1f} s)"
        )

    emit(args, doc, human)
    return EXIT_OK


def _progress(started: float) -> Callable[[ExportReport], None]:
    """A line on stderr every PROGRESS_INTERVAL_SECONDS: results read, rows written (nothing for a short export)."""
    last = [started]

    def show(report: ExportReport) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL_SECONDS:
            last[0] = now
            print(f"export: {plural(report.results, 'result')} read, {plural(report.rows, 'row')} written", file=sys.stderr, flush=True)

    return show
