"""``failures`` and ``inspect``: why groups failed (their errors, the processor's own line, tracebacks), and one group in full."""

from __future__ import annotations

import argparse

from s3wq.cli.output import EXIT_OK, emit, printable
from s3wq.cli.workspace import open_indexed_workspace
from s3wq.ops.inspection import inspect_group, list_failures
from s3wq.ops.problems import list_input_errors
from s3wq.wording import plural as _plural

# Lines of a failure's traceback shown without --json or -v: where it was raised.
_TRACEBACK_TAIL_LINES = 6


def _frame_line(frame: dict | None) -> str | None:
    """``at failproc.py:12 in process: data = json.loads(raw)``: the processor's own line that the error came through."""
    if not frame:
        return None
    return printable(f"at {frame['file']}:{frame['line']} in {frame['function']}" + (f": {frame['code']}" if frame.get("code") else ""))


def cmd_failures(args: argparse.Namespace) -> int:
    backend = open_indexed_workspace(args.workspace)
    if args.inputs:
        groups = list_input_errors(backend)

        def inputs_text(d: dict) -> str:
            lines = [f"{_plural(len(d['groups']), 'done group')} with inputs the processor could not use"]
            for g in d["groups"]:
                lines.append(f"{g['hash']}  {_plural(g['input_errors'] or 0, 'input')}:")
                lines.extend(f"    {printable(i.get('path'))}: {printable(i.get('error'))}" for i in g["inputs"])
            return "\n".join(lines)

        emit(args, {"groups": groups}, inputs_text)
        return EXIT_OK
    failures = list_failures(backend)
    verbose = getattr(args, "verbose", False)

    def human(d: dict) -> str:
        lines = [_plural(len(d["failures"]), "failed group")]
        for f in d["failures"]:
            lines.append(f"{f['hash']}  attempts={f['attempts']}  kind={printable(f['kind'])}  {printable(f['error'])}")
            lines.extend(f"    {printable(p)}" for p in f["paths"])
            # The user's own line first: the end of the stack is often all library code (json/decoder.py).
            at = _frame_line(f.get("error_frame"))
            if at:
                lines.append(f"    {at}")
            if f.get("traceback"):
                tb = f["traceback"].rstrip().splitlines()
                shown = tb if verbose else tb[-_TRACEBACK_TAIL_LINES:]
                lines.append(
                    "    traceback" + ("" if verbose or len(tb) <= len(shown) else f" (last {len(shown)} lines; -v for all)") + ":"
                )
                lines.extend(f"      {t}" for t in shown)
        return "\n".join(lines)

    emit(args, {"failures": failures}, human)
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    doc = inspect_group(open_indexed_workspace(args.workspace), args.hash)

    def human(d: dict) -> str:
        ahead_of = (d["lock"] or {}).get("claimed_ahead_of")
        state = d["state"] + (f" (claimed ahead of group {ahead_of}, which its worker still holds: not started)" if ahead_of else "")
        lines = [f"group {d['hash']}: {printable(state)}", "paths:", *(f"  {printable(p)}" for p in d["paths"])]
        lock = d["lock"]
        lines.append(
            "lock: none"
            if lock is None
            else "lock: " + ", ".join(f"{k}={printable(v)}" for k, v in lock.items() if v is not None and v is not False)
        )
        for name in ("done", "failed"):
            if d[name] is not None:
                lines.append(
                    f"{name}: "
                    + ", ".join(f"{k}={printable(v)}" for k, v in d[name].items() if k not in ("paths", "traceback", "error_frame"))
                )
        at = _frame_line((d["failed"] or {}).get("error_frame"))
        if at:
            lines.append(at)
        if d["failed"] and d["failed"].get("traceback"):
            lines.append("traceback:")
            lines.extend(f"  {t}" for t in d["failed"]["traceback"].rstrip().splitlines())
        if d.get("input_errors"):
            lines.append(f"input errors: {d['input_errors'].get('input_errors')}")
            lines.extend(f"  {printable(i.get('path'))}: {printable(i.get('error'))}" for i in d["input_errors"].get("inputs", []))
        result = d["result"]
        lines.append(
            "result: none"
            if result is None
            else f"result: {result['uri']} ({_plural(result['records'], 'record')}, {_plural(result['bytes'], 'byte')})"
        )
        return "\n".join(lines)

    emit(args, doc, human)
    return EXIT_OK
