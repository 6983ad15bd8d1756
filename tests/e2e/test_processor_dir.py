"""A processor folder (modules and a requirements.txt) deployed into the local cloud, and run by ``s3wq work``.

The local cloud runs it from the asset ``cdk deploy -c processorDir=...`` would
ship, built for this machine, in an interpreter that sees nothing else. The
folder's requirement (humanize) is not in the dev venv, so a result it computed
proves the asset's requirements were used; a folder that imports what the dev
venv holds but does not require it (rich) fails there, so nothing leaks in.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from s3wq.dev.localcloud.asset import CACHE_ENV, ProcessorFolder
from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.ops.status import queue_status
from s3wq.store import layout
from tests.e2e.test_local_cloud import upload_manifest, wait_for_end, workspace_backend

# A pure-Python wheel that neither s3wq's requirements nor the dev venv hold.
REQUIREMENT = "humanize==4.12.3"
HUMANIZE_PROCESSOR = """
import humanize


def process(group, ctx):
    records = []
    for path in group.paths:
        count = int(ctx.read_input(path).decode())
        records.append({"source": path, "words": humanize.intword(count), "commas": humanize.intcomma(count)})
    ctx.write_result(records)
"""
# rich is in the dev venv (the CLI's tables) and not in the asset unless the folder requires it.
RICH_PROCESSOR = """
import rich


def process(group, ctx):
    ctx.write_result([{"source": path, "rich": rich.__name__} for path in group.paths])
"""
NUMBERS = (1_200_000, 3_400_000_000, 56_000_000)


@pytest.fixture(scope="module")
def asset_cache(tmp_path_factory):
    """One cache for this module's deploys: the bare interpreter is made once."""
    return tmp_path_factory.mktemp("asset-cache")


def make_folder(root, source: str, requirements: str | None):
    root.mkdir()
    (root / "bignums.py").write_text(source, encoding="utf-8")
    if requirements is not None:
        (root / "requirements.txt").write_text(f"# what bignums.py imports\n{requirements}\n", encoding="utf-8")
    return root


def drain(cloud: LocalCloud) -> tuple[dict, dict, object]:
    stack = cloud.deploy({"defaultWorkers": 2, "groupSize": 1, "maxAttempts": 1})
    s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
    for number in NUMBERS:
        s3.put_object(Bucket=stack.bucket, Key=f"inputs/n-{number}.txt", Body=str(number).encode())
    upload_manifest(s3, stack.bucket, stack, [f"s3://{stack.bucket}/inputs/*.txt"])
    execution = wait_for_end(sfn, stack.state_machine_arn, timeout=180)
    backend = workspace_backend(s3, stack)
    return execution, queue_status(backend), backend


def test_the_dev_venv_lacks_the_folders_requirement_and_holds_rich():
    # What the two tests below prove rests on this.
    assert importlib.util.find_spec("humanize") is None
    assert importlib.util.find_spec("rich") is not None


def test_a_folder_with_a_third_party_requirement_drains_a_queue_in_the_local_cloud(tmp_path, asset_cache):
    folder = ProcessorFolder.check(make_folder(tmp_path / "myproc", HUMANIZE_PROCESSOR, REQUIREMENT), "bignums:process")
    with LocalCloud(log_dir=tmp_path / "cloud", processor=folder, asset_cache=asset_cache) as cloud:
        execution, status, backend = drain(cloud)
        assert execution["status"] == "SUCCEEDED", execution.get("cause")
        assert (status["groups"], status["done"], status["failed"], status["remaining"]) == (3, 3, 0, 0)
        records = {}
        for key in backend.list_keys(layout.RESULTS_PREFIX):
            for line in backend.read(key).body.decode().splitlines():
                record = json.loads(line)
                records[record["source"].rsplit("/", 1)[1]] = (record["words"], record["commas"])
    assert records == {
        "n-1200000.txt": ("1.2 million", "1,200,000"),
        "n-3400000000.txt": ("3.4 billion", "3,400,000,000"),
        "n-56000000.txt": ("56.0 million", "56,000,000"),
    }


def test_a_folder_that_imports_what_only_the_dev_venv_holds_fails_in_the_local_cloud(tmp_path, asset_cache):
    folder = ProcessorFolder.check(make_folder(tmp_path / "myproc", RICH_PROCESSOR, None), "bignums:process")
    with LocalCloud(log_dir=tmp_path / "cloud", processor=folder, asset_cache=asset_cache) as cloud:
        execution, status, backend = drain(cloud)
        # The processor never loaded: no group ran, so none is done or failed, and the execution gives up.
        assert (execution["status"], execution.get("error")) == ("FAILED", "WorkRemaining")
        assert (status["done"], status["failed"], status["pending"]) == (0, 0, 3)
        assert list(backend.list_keys(layout.RESULTS_PREFIX)) == []
        worker_log = next((cloud.log_dir / "lambda").glob("*Worker*.log")).read_text()
    assert "[ERROR] ProcessorNotFound: processor module 'bignums' cannot be imported" in worker_log
    assert "bignums.py:2: No module named 'rich'" in worker_log


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"other.py": ""}, "holds no module 'bignums'"),
        ({"bignums.py": "", "s3wq/__init__.py": ""}, "would shadow s3wq's own package"),
        ({"bignums.py": "", "boto3/__init__.py": ""}, "boto3/ would shadow boto3, which s3wq needs"),
    ],
)
def test_a_folder_without_the_module_or_shadowing_s3wq_is_refused_before_anything_starts(tmp_path, files, expected):
    folder = tmp_path / "myproc"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    logs = tmp_path / "logs"
    command = ["local", "demo", "--processor", "bignums:process", "--processor-dir", str(folder), "--keep-logs", str(logs)]
    result = subprocess.run(
        [sys.executable, "-m", "s3wq", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("s3wq: error: ") and expected in line
    assert not logs.exists()  # no local cloud was started: it would have written its server log there


def test_local_demo_refuses_a_folder_whose_processor_does_not_load_from_its_asset_before_the_cloud_starts(tmp_path, asset_cache):
    # The folder of the first test without its requirements.txt: humanize is nowhere, and the command line says so.
    folder = make_folder(tmp_path / "myproc", HUMANIZE_PROCESSOR, None)
    logs = tmp_path / "logs"
    command = ["local", "demo", "--processor", "bignums:process", "--processor-dir", str(folder), "--keep-logs", str(logs)]
    result = subprocess.run(
        [sys.executable, "-m", "s3wq", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, CACHE_ENV: str(asset_cache)},
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("s3wq: error: processor module 'bignums' cannot be imported: ")
    assert line.endswith("bignums.py:2: No module named 'humanize'")
    assert not (logs / "server.log").exists()  # the server never started
