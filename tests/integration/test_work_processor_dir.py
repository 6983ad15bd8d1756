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


def _link_to_hidden(folder, outside):
    (folder / ".env").write_text("AWS_SECRET_ACCESS_KEY=...\n", encoding="utf-8")
    (folder / "settings.txt").symlink_to(".env")


def _hard_link_out(folder, outside):
    outside.write_text("not in the folder\n", encoding="utf-8")
    (folder / "notes.txt").hardlink_to(outside)


def _file(name, text=""):
    def make(folder, outside):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")

    return make


# What the issue found shipped (or ran), each with the start of its one line.
REFUSED = {
    "boto3": (_file("boto3/__init__.py", "raise SystemExit('the folder replaced boto3')\n"), "boto3/ would shadow boto3, which s3wq needs"),
    "stdlib": (_file("queue.py"), "queue.py would shadow the standard library's queue"),
    "link to a hidden file": (_link_to_hidden, "settings.txt links to .env, which does not ship"),
    "hard link out": (_hard_link_out, "notes.txt is hard-linked to a name outside the folder or hidden in it"),
    "sitecustomize": (_file("sitecustomize.py", "open(__file__ + '.ran', 'w').close()\n"), "sitecustomize.py is a start-up hook"),
    "pth": (_file("helpers/extra.pth", "import os\n"), "helpers/extra.pth is a start-up hook"),
}


def _tree(root):
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("case", REFUSED)
def test_a_folder_that_ships_what_it_may_not_is_one_line_exit_2_and_changes_nothing(tmp_path, case):
    """The rule cdk deploy -c processorDir checks (s3wq.processors.folder), before the workspace is opened or a host started."""
    make, expected = REFUSED[case]
    folder = make_folder(tmp_path / "myproc")
    make(folder, tmp_path / "outside.txt")
    (tmp_path / "inputs.txt").write_text("x", encoding="utf-8")
    workspace = tmp_path / "ws"
    assert s3wq("populate", str(workspace), str(tmp_path / "inputs.txt"), cwd=tmp_path).returncode == 0
    before = _tree(workspace)

    worked = s3wq("work", str(workspace), "--processor", "myproc:process", "--processor-dir", str(folder), cwd=tmp_path)

    assert worked.returncode == 2, worked.stderr
    [line] = worked.stderr.splitlines()
    assert line.startswith(f"s3wq: error: --processor-dir {str(folder)!r}: {expected}"), line
    assert _tree(workspace) == before
    assert not list(folder.glob("*.ran")), "a start-up hook of the folder ran"
