"""``s3wq work --processor-dir DIR``: the folder ``cdk deploy -c processorDir=DIR`` ships, run by a worker on this machine.

The folder goes first on the import path of the worker and of its processor
host, so its modules import each other as they do at the root of the Lambda
asset, from whatever directory the worker is started in.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROCESSOR = """
from shout import loud


def process(group, ctx):
    ctx.write_result([{"source": path, "text": loud(ctx.read_input(path).decode())} for path in group.paths])
"""


def s3wq(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s3wq", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def make_folder(root):
    root.mkdir()
    (root / "myproc.py").write_text(PROCESSOR, encoding="utf-8")
    (root / "shout.py").write_text("def loud(text):\n    return text.upper() + '!'\n", encoding="utf-8")
    return root


def test_work_drains_a_local_queue_with_a_processor_from_a_folder(tmp_path):
    folder = make_folder(tmp_path / "myproc")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for number in range(3):
        (inputs / f"doc-{number}.txt").write_text(f"document {number}", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"  # not the folder: only --processor-dir can find myproc
    elsewhere.mkdir()
    workspace = str(tmp_path / "ws")
    populated = s3wq("populate", workspace, str(inputs / "*.txt"), "--group-size", "1", cwd=elsewhere)
    assert populated.returncode == 0, populated.stderr

    worked = s3wq("work", workspace, "--processor", "myproc:process", "--processor-dir", str(folder), "--json", cwd=elsewhere)

    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["processed"] == 3
    records = [json.loads(line) for path in sorted((tmp_path / "ws" / "results").iterdir()) for line in path.read_text().splitlines()]
    assert sorted(record["text"] for record in records) == ["DOCUMENT 0!", "DOCUMENT 1!", "DOCUMENT 2!"]


@pytest.mark.parametrize("spec", ["nosuch:process", "json:dumps"])
def test_a_folder_without_the_module_is_one_line_and_exit_2(tmp_path, spec):
    """Also a module found elsewhere (the standard library's json): a deploy with processorDir would refuse it."""
    folder = make_folder(tmp_path / "myproc")
    (tmp_path / "inputs.txt").write_text("x", encoding="utf-8")
    workspace = str(tmp_path / "ws")
    assert s3wq("populate", workspace, str(tmp_path / "inputs.txt"), cwd=tmp_path).returncode == 0

    worked = s3wq("work", workspace, "--processor", spec, "--processor-dir", str(folder), cwd=tmp_path)

    assert worked.returncode == 2
    [line] = worked.stderr.splitlines()
    top = spec.split(":")[0].split(".")[0]
    assert line.startswith(f"s3wq: error: --processor-dir {str(folder)!r} holds no module {top!r}"), line
    assert not (tmp_path / "ws" / "results").exists() or not any((tmp_path / "ws" / "results").iterdir())
