"""``s3wq work --processor vlm --vlm-endpoint URL`` from the OCR venv, against a stand-in in this process; the flags' errors.

The vlm processor runs in .venv-ocr (it renders pages with the ocr extra); the endpoint is a real server on a loopback
port (s3wq.dev.vlm_standin). The flags set S3WQ_VLM_* for the processor host, checked before the workspace is opened.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli

from s3wq.cli.output import EXIT_SERVICE_UNAVAILABLE
from s3wq.dev.localcloud.asset import CACHE_ENV
from s3wq.dev.samples import make_pdf
from s3wq.dev.vlm_standin import StandIn

from .conftest import ocr_env

PDFS = {"one.pdf": [["First page of one."], ["Second page of one."]], "two.pdf": [["The only page of two."]]}
DOLMA_KEYS = {"id", "text", "source", "added", "created", "metadata"}


def _work(ocr_python: Path, workspace: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ocr_python), "-m", "s3wq", "work", workspace, "--json", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=ocr_env(),
    )


def _local_queue(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    for name, pages in PDFS.items():
        (tmp_path / name).write_bytes(make_pdf(pages))
    populate = run_cli("populate", str(workspace), *(str(tmp_path / name) for name in PDFS), "--group-size", "1")
    assert populate.returncode == 0, populate.stderr
    return workspace


def _assert_drained(workspace: str, work: subprocess.CompletedProcess) -> None:
    assert work.returncode == 0, work.stderr[-3000:]
    status = json.loads(run_cli("status", workspace, "--json").stdout)
    assert (status["groups"], status["done"], status["failed"], status["pending"]) == (2, 2, 0, 0), (status, work.stderr[-3000:])


def _assert_dolma(lines: list[str]) -> None:
    documents = {json.loads(line)["metadata"]["Source-File"].rsplit("/", 1)[-1]: json.loads(line) for line in lines}
    assert set(documents) == set(PDFS)
    for name, document in documents.items():
        assert DOLMA_KEYS <= set(document) and document["source"] == "olmocr", document
        assert document["text"].strip(), document
        assert document["metadata"]["pdf-total-pages"] == len(PDFS[name]), document["metadata"]


def test_work_with_the_vlm_processor_drains_a_local_queue_into_dolma_documents(ocr_python, tmp_path):
    workspace = _local_queue(tmp_path)
    with StandIn() as standin:
        work = _work(ocr_python, str(workspace), "--processor", "vlm", "--vlm-endpoint", standin.url, "--vlm-in-flight", "2")
        asked = standin.requests()

    _assert_drained(str(workspace), work)
    assert len(asked) == 3 and not [r for r in asked if r.refused], asked  # one question per page, each as olmocr asks it
    _assert_dolma([line for path in sorted((workspace / "results").glob("*.jsonl")) for line in path.read_text().splitlines()])


def test_work_with_the_vlm_processor_drains_a_queue_on_s3(ocr_python, tmp_path, s3_client, bucket, s3_workspace):
    for name, pages in PDFS.items():
        s3_client.put_object(Bucket=bucket, Key=f"inputs/{name}", Body=make_pdf(pages))
    assert run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/*", "--group-size", "1").returncode == 0
    with StandIn() as standin:
        work = _work(ocr_python, s3_workspace, "--processor", "vlm", "--vlm-endpoint", standin.url)

    _assert_drained(s3_workspace, work)
    keys = [item["Key"] for item in s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/results/")["Contents"]]
    _assert_dolma([line for key in keys for line in s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()])


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--processor", "vlm"], "--processor vlm needs --vlm-endpoint URL (or S3WQ_VLM_ENDPOINT)"),
        (["--processor", "auto", "--vlm-endpoint", "ftp://host/v1"], "--vlm-endpoint='ftp://host/v1' is not an http(s) URL with a host"),
        (
            ["--processor", "vlm", "--vlm-endpoint", "http://u:key@host/v1"],
            "--vlm-endpoint holds credentials: put the API key in S3WQ_VLM_API_KEY",
        ),
        (
            ["--processor", "vlm", "--vlm-endpoint", "http://host/v1", "--vlm-in-flight", "0"],
            "--vlm-in-flight=0 is out of range (1 to 1024)",
        ),
        (["--vlm-endpoint", "http://host/v1"], "--vlm-endpoint: the vlm and auto processors' settings; --processor is 'text'"),
    ],
    ids=["no-endpoint", "not-http", "credentials-in-url", "in-flight-0", "not-the-vlm-processor"],
)
def test_a_bad_vlm_flag_is_one_line_and_exit_2_before_the_workspace_is_touched(tmp_path, flags, problem):
    workspace = tmp_path / "ws"
    workspace.mkdir()

    result = run_cli("work", str(workspace), *flags)

    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("s3wq: error: ") and problem in line, line
    assert list(workspace.iterdir()) == []


def test_a_bad_vlm_endpoint_for_the_local_demo_is_one_line_and_exit_2_before_anything_starts():
    result = run_cli("local", "demo", "--processor", "vlm", "--vlm-endpoint", "localhost:8000")

    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "--vlm-endpoint='localhost:8000' is not an http(s) URL with a host" in line


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_endpoint_that_is_down_stops_the_worker_with_exit_69_and_nothing_failed(ocr_python, tmp_path):
    workspace = _local_queue(tmp_path)

    work = _work(ocr_python, str(workspace), "--processor", "vlm", "--vlm-endpoint", f"http://127.0.0.1:{_closed_port()}/v1")

    assert work.returncode == EXIT_SERVICE_UNAVAILABLE, work.stderr[-3000:]
    (line,) = [line for line in work.stderr.splitlines() if line.startswith("s3wq: a service")]
    assert "is unavailable" in line and "nothing failed" in line, line
    status = json.loads(run_cli("status", str(workspace), "--json").stdout)
    assert (status["done"], status["failed"], status["pending"]) == (0, 0, 2), status


def test_the_vlm_demo_says_its_endpoint_is_a_stand_in_and_does_the_work(tmp_path_factory):
    # The dev venv runs the demo; the worker runs from the asset its image would carry (pip, cached for the session).
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "s3wq-ocr-asset-cache"
    cache.mkdir(exist_ok=True)

    demo = subprocess.run(
        [sys.executable, "-m", "s3wq", "local", "demo", "--processor", "vlm", "--inputs", "4", "--workers", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, CACHE_ENV: str(cache)},
    )

    assert demo.returncode == 0, demo.stderr[-3000:]
    (line,) = [line for line in demo.stderr.splitlines() if line.startswith("vlm: ")]
    assert re.fullmatch(
        r"vlm: no --vlm-endpoint given: using a stand-in endpoint at http://127\.0\.0\.1:\d+/v1 \(not a model: .*\)", line
    ), line
    summary = json.loads(demo.stdout)
    assert summary["execution_status"] == "SUCCEEDED"
    assert (summary["status"]["done"], summary["status"]["failed"], summary["status"]["remaining"]) == (2, 0, 0), summary
    assert summary["sample_result"]["source"].endswith(".pdf"), summary["sample_result"]


READ_A_SCAN = """
import io, json
from s3wq.dev.samples import draw_scan
from s3wq.dev.localcloud.vlm import page_reader
image = draw_scan(["The quick brown fox jumps", "over the lazy dog"], dpi=150, inches=(6.0, 2.0))
png = io.BytesIO()
image.save(png, format="PNG")
print(json.dumps(page_reader()(png.getvalue())))
"""


def test_where_the_ocr_extra_is_importable_the_demo_s_stand_in_answers_with_the_page_s_ocr(ocr_python):
    read = subprocess.run([str(ocr_python), "-c", READ_A_SCAN], capture_output=True, text=True, timeout=300, env=ocr_env())

    assert read.returncode == 0, read.stderr[-3000:]
    assert json.loads(read.stdout).split() == "The quick brown fox jumps over the lazy dog".split()
