"""The asset the local cloud builds for a processor folder: what it holds, what its interpreter sees, and what a second build reuses."""

from __future__ import annotations

import os
import subprocess

import pytest

from s3wq.dev.localcloud.asset import ProcessorFolder, build_task_asset
from s3wq.errors import BadInput

REQUIREMENT = "humanize==4.12.3"  # in neither s3wq's requirements nor the dev venv


def run_in(asset, code: str) -> subprocess.CompletedProcess:
    """``code`` as a function of the local cloud runs it: the asset's interpreter, PYTHONPATH the asset alone."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(asset.path), "PYTHONSAFEPATH": "1"}
    return subprocess.run([asset.python, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd="/")


def test_the_asset_holds_the_folder_and_its_requirement_and_its_interpreter_sees_nothing_else(tmp_path):
    folder = tmp_path / "myproc"
    folder.mkdir()
    (folder / "myproc.py").write_text("import helper\n\ndef process(group, ctx):\n    pass\n", encoding="utf-8")
    (folder / "helper.py").write_text("WORD = 'first'\n", encoding="utf-8")
    (folder / "requirements.txt").write_text(f"{REQUIREMENT}\n", encoding="utf-8")
    cache = tmp_path / "cache"

    first = build_task_asset(ProcessorFolder.check(folder, "myproc:process"), into=tmp_path / "one", cache=cache)

    shown = run_in(
        first, "import humanize, helper, s3wq, s3wq.handlers.worker; print(humanize.intword(1200000), helper.WORD, s3wq.__file__)"
    )
    assert shown.returncode == 0, shown.stderr
    words, number, word, s3wq_file = shown.stdout.split()
    assert (f"{words} {number}", word) == ("1.2 million", "first")
    assert s3wq_file.startswith(str(tmp_path / "one"))  # the asset's copy of the runtime, not the dev tree's
    # Not in the asset: the tools, and the dev venv's packages.
    for module in ("s3wq.cli", "s3wq.dev", "rich", "moto", "pytest"):
        missing = run_in(first, f"import {module}")
        assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr, module

    # The modules change, the requirements do not: pip's part is reused, the modules are the new ones.
    (folder / "helper.py").unlink()
    (folder / "myproc.py").write_text("WORD = 'second'\n\ndef process(group, ctx):\n    pass\n", encoding="utf-8")
    second = build_task_asset(ProcessorFolder.check(folder, "myproc:process"), into=tmp_path / "two", cache=cache)

    assert second.path[1] == first.path[1] and second.python == first.python
    assert len(list(cache.glob("requirements-*"))) == 1
    shown = run_in(second, "import myproc; print(myproc.WORD)")
    assert shown.stdout.strip() == "second", shown.stderr
    assert "No module named 'helper'" in run_in(second, "import helper").stderr


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, "is not a folder"),
        ({"other.py": ""}, "holds no module 'myproc'"),
        ({"myproc.py": "", "s3wq.py": ""}, "would shadow s3wq's own package"),
        ({"myproc.py": "", "sitecustomize.py": ""}, "sitecustomize.py is a start-up hook"),
        ({"myproc.py": "", "queue.py": ""}, "queue.py would shadow the standard library's queue"),
        ({"myproc.py": "", "requirements.txt": "evil-1.0-py3-none-any.whl\n"}, "'evil-1.0-py3-none-any.whl' is not a plain requirement"),
        ({"myproc.py": "", "requirements.txt": "-r other.txt\n"}, "requirements.txt:1: '-r other.txt' is not a plain requirement"),
    ],
)
def test_a_folder_cdk_deploy_would_refuse_is_refused_in_one_line_naming_the_flag(tmp_path, files, expected):
    folder = tmp_path / "myproc"
    if files:
        folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    with pytest.raises(BadInput) as refused:
        ProcessorFolder.check(folder, "myproc:process")
    message = str(refused.value)
    assert expected in message and "\n" not in message
    assert "processorDir" not in message or "requirements.txt" in message


def test_a_requirement_pip_cannot_install_is_one_line_and_nothing_is_cached(tmp_path):
    folder = tmp_path / "myproc"
    folder.mkdir()
    (folder / "myproc.py").write_text("def process(group, ctx):\n    pass\n", encoding="utf-8")
    (folder / "requirements.txt").write_text("s3wq-no-such-package-anywhere==0.0.1\n", encoding="utf-8")
    cache = tmp_path / "cache"
    with pytest.raises(BadInput) as refused:
        build_task_asset(ProcessorFolder.check(folder, "myproc:process"), into=tmp_path / "one", cache=cache)
    assert "could not be built" in str(refused.value) and "s3wq-no-such-package-anywhere" in str(refused.value)
    assert list(cache.glob("requirements-*")) == []


def test_a_relative_folder_is_the_callers_not_the_repositorys(tmp_path, monkeypatch):
    """The check runs from s3wq's checkout: ./myproc must still mean the folder beside the caller."""
    (tmp_path / "myproc").mkdir()
    (tmp_path / "myproc" / "myproc.py").write_text("def process(group, ctx):\n    pass\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    folder = ProcessorFolder.check("./myproc", "myproc:process")

    assert folder.directory == (tmp_path / "myproc").resolve()
    assert folder.requirements is None
