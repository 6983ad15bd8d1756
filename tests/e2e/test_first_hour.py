"""The README's quick start, run exactly as written: what a newcomer does in their first hour.

The ``sh`` block after the ``<!-- first-hour -->`` marker in README.md is run
verbatim by bash under ``set -euo pipefail``. The README says to run it from
the repository root after ``make install``; the only thing it takes from
there is ``.venv/`` (its first line is ``. .venv/bin/activate``). So the test
runs it in an empty temporary directory that holds nothing but a symlink
``.venv`` to the repository's venv: no text of the block is rewritten, no
file of the repository is copied, and anything else the block needed from the
repository root would make it fail here.

The environment is a shell's, not the test session's: PATH without the venv
(so ``s3wq`` is found only because the block activates it), HOME and TMPDIR
inside the temporary directory (the block's ``mktemp -d`` lands there), and
no AWS settings. The assertions are on what the run left behind: one result
record per input with the values the processor computes, and a workspace
whose every group is done, read back through the library as well as from
what ``s3wq status`` printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support import REPO_ROOT

from s3wq.ops.status import queue_status
from s3wq.store import LocalBackend

README = REPO_ROOT / "README.md"
MARKER = "<!-- first-hour -->"
TIMEOUT_SECONDS = 120


def first_hour_block(readme: str) -> str:
    return readme_block(readme, MARKER)


def readme_block(readme: str, marker: str) -> str:
    """The body of the fenced ``sh`` block that directly follows the line ``marker``."""
    lines = readme.splitlines()
    marks = [n for n, line in enumerate(lines) if line.strip() == marker]
    if len(marks) != 1:
        pytest.fail(f"README.md must have exactly one line {marker!r} before its sh block; found {len(marks)}")
    rest = lines[marks[0] + 1 :]
    if not rest or rest[0].strip() != "```sh":
        pytest.fail(f"the line after {marker!r} in README.md must open a ```sh block, got {rest[:1]!r}")
    try:
        end = next(n for n, line in enumerate(rest[1:], start=1) if line.strip() == "```")
    except StopIteration:
        pytest.fail(f"the ```sh block after {marker!r} in README.md is never closed")
    body = "\n".join(rest[1:end]) + "\n"
    if not body.strip():
        pytest.fail(f"the ```sh block after {marker!r} in README.md is empty")
    return body


def shell_environment(home: Path, scratch: Path) -> dict[str, str]:
    venv_bin = (REPO_ROOT / ".venv" / "bin").resolve()
    path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p and Path(p).resolve() != venv_bin)
    return {"PATH": path, "HOME": str(home), "TMPDIR": str(scratch), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def files_under(root: Path, pattern: str) -> list[Path]:
    """Files matching ``pattern`` anywhere under ``root``, not following symlinks (so never into .venv)."""
    matches = []
    for folder, _, names in os.walk(root):
        matches.extend(Path(folder) / name for name in names if re.fullmatch(pattern, name))
    return sorted(matches)


def counts_line(stdout: str) -> dict[str, int]:
    """What ``s3wq status`` printed: its ``groups=…  paths=…  done=…`` line, as numbers."""
    lines = [line for line in stdout.splitlines() if line.startswith("groups=")]
    assert len(lines) == 1, f"expected one status line in the output:\n{stdout}"
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", lines[0])}


def test_readme_quick_start_runs_as_written(tmp_path):
    block = first_hour_block(README.read_text(encoding="utf-8"))
    if not (REPO_ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.fail("no .venv at the repository root: run `make install` first (the quick start activates it)")
    cwd = tmp_path / "fresh"
    home = tmp_path / "home"
    scratch = tmp_path / "tmp"
    for folder in (cwd, home, scratch):
        folder.mkdir()
    (cwd / ".venv").symlink_to(REPO_ROOT / ".venv", target_is_directory=True)

    run = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block],
        cwd=cwd,
        env=shell_environment(home, scratch),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    shown = f"--- block ---\n{block}--- stdout ---\n{run.stdout}--- stderr ---\n{run.stderr}"
    assert run.returncode == 0, f"the quick start exited {run.returncode}\n{shown}"

    # Where the block left its inputs and its workspace: wherever it chose (a mktemp -d folder today).
    results = files_under(tmp_path, r"output_[0-9a-f]{40}\.jsonl")
    assert results, f"no result objects (results/output_<hash>.jsonl) anywhere\n{shown}"
    workspaces = {r.parent.parent for r in results}
    assert len(workspaces) == 1, f"results in more than one workspace: {sorted(map(str, workspaces))}"
    workspace = workspaces.pop()
    inputs = [p for p in files_under(tmp_path, r".+\.txt") if p.parent.name == "inputs"]
    assert inputs, f"the block made no inputs/*.txt\n{shown}"

    # One record per input, with what the README's processor computes from that input.
    records = [json.loads(line) for result in results for line in result.read_text(encoding="utf-8").splitlines()]
    expected = []
    for path in inputs:
        text = path.read_text(encoding="utf-8")
        expected.append({"source": str(path.resolve()), "lines": text.count("\n"), "words": len(text.split())})
    key = lambda record: record["source"]  # noqa: E731
    assert sorted(records, key=key) == sorted(expected, key=key), shown
    printed = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert sorted(printed, key=key) == sorted(expected, key=key), f"the block's last command shows the results\n{shown}"

    # Every group done, as the workspace itself says and as `s3wq status` printed it.
    status = queue_status(LocalBackend(str(workspace)))
    assert status["paths"] == len(inputs)
    assert status["groups"] == len(results)
    left = {name: status[name] for name in ("failed", "locked", "pending", "remaining")}
    assert status["done"] == status["groups"] and not any(left.values()), status
    shown_status = counts_line(run.stdout)
    for name in ("groups", "paths", "done", "failed", "locked", "pending", "remaining"):
        assert shown_status[name] == status[name], f"status printed {shown_status}, the workspace holds {status}"
