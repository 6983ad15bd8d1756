"""The vlm and auto processors against a real HTTP endpoint: the stand-in (s3wq.dev.vlm_standin), told how to fail.

Each run is one group read as a worker reads it (run_group.py, in the OCR venv); the stand-in runs here and checks
every request it gets against olmocr's (the prompt, the page's size, the sampling). Each outcome ends as issue #30's
item 2 says: retried and read, read by the CPU path and marked a fallback, an input error that says why, or the group
handed back (ServiceUnavailable) with nothing written. Nothing is lost: every input has its record or the group is
not done.
"""

from __future__ import annotations

import socket

import pytest

from s3wq.dev.vlm_standin import StandIn, Step

from .conftest import once_per_session, run_in_ocr_venv

MODEL = "allenai/olmOCR-2-7B-1025-FP8"


@pytest.fixture(scope="module")
def docs(ocr_python, tmp_path_factory):
    """The documents of documents.py (the vlm ones among them), by name."""
    return once_per_session(tmp_path_factory, "vlm-documents", lambda folder: run_in_ocr_venv(ocr_python, "documents.py", str(folder)))


def run(ocr_python, tmp_path, standin, processor, *paths, **env):
    env = {"OCR_TEST_PROCESSOR": processor, "S3WQ_VLM_ENDPOINT": standin.url if standin else "http://127.0.0.1:9/v1", **env}
    return run_in_ocr_venv(ocr_python, "run_group.py", str(tmp_path / "ws"), *paths, timeout=300, **env)


def flat(text):
    return " ".join((text or "").split())


def test_vlm_asks_the_model_every_page_as_olmocr_does_and_writes_olmocrs_document(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL, latency=0.05) as standin:
        out = run(ocr_python, tmp_path, standin, "vlm", docs["vlm_mixed.pdf"], docs["layer.pdf"])
        sent, refused = standin.requests(), standin.refusals()
    assert refused == []  # every request was olmocr's: its prompt, a 1,288-pixel PNG, its temperature and max_tokens
    assert len(sent) == 5 and {(r.width, r.height) for r in sent} <= {(996, 1288), (1288, 996)}
    mixed, layer = out["records"]
    assert (mixed["source"], mixed["metadata"]["Source-File"], mixed["metadata"]["pdf-total-pages"]) == ("olmocr", docs["vlm_mixed.pdf"], 3)
    assert [span[2] for span in mixed["attributes"]["pdf_page_numbers"]] == [1, 2, 3]
    assert mixed["metadata"]["total-fallback-pages"] == 0 and mixed["metadata"]["total-input-tokens"] > 0
    assert [p["route"] for p in mixed["metadata"]["pages"]] == ["vlm"] * 3
    texts = [mixed["text"][start:end] for start, end, _ in mixed["attributes"]["pdf_page_numbers"]]
    assert len({t.split("sha1 ")[1][:12] for t in texts}) == 3  # each page its own answer, in page order
    assert layer["metadata"]["pdf-total-pages"] == 2 and "error" not in mixed and out["input_error_count"] == 0


def test_auto_sends_only_the_table_page_of_a_mixed_pdf_to_the_model(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        out = run(ocr_python, tmp_path, standin, "auto", docs["vlm_mixed.pdf"])
        sent = standin.requests()
    (record,) = out["records"]
    pages = record["metadata"]["pages"]
    assert len(sent) == 1 and [p["route"] for p in pages] == ["text_layer", "ocr", "vlm"]
    assert pages[2]["escalated"] == "1 table found" and pages[2]["cpu_route"] == "text_layer"
    assert "Mahomedan faith" in flat(record["text"]) and "first chapter describes" in flat(record["text"])
    assert record["metadata"]["total-fallback-pages"] == 0 and out["input_error_count"] == 0


def test_429_with_retry_after_and_500s_are_retried_and_the_page_is_read(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        standin.script(Step("status", status=429, retry_after=1), Step("status", status=500), Step("status", status=503))
        out = run(ocr_python, tmp_path, standin, "vlm", docs["layer.pdf"])
        statuses = sorted(r.status for r in standin.requests())
    (record,) = out["records"]
    assert statuses == [200, 200, 429, 500, 503]
    assert record["metadata"]["total-fallback-pages"] == 0 and "error" not in record


def test_malformed_front_matter_on_every_attempt_falls_back_to_the_cpu_path(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        standin.script(*[Step("malformed")] * 8)
        out = run(ocr_python, tmp_path, standin, "vlm", docs["bad_layer.pdf"])
        temperatures = [r.temperature for r in standin.requests()]
    (record,) = out["records"]
    (page,) = record["metadata"]["pages"]
    assert temperatures == [0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0]  # olmocr's eight attempts, each hotter
    assert page["is_fallback"] and page["attempts"] == 8 and "read by the CPU path" in page["reason"]
    assert record["metadata"]["total-fallback-pages"] == 1
    assert "Mahomedan faith" in flat(record["text"])  # the CPU path re-read the bad layer, as ocr does
    assert out["input_error_count"] == 0


def test_with_no_fallback_a_page_the_model_cannot_read_is_an_input_error(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        standin.script(Step("length"), default=Step("too_long"))
        out = run(ocr_python, tmp_path, standin, "vlm", docs["layer.pdf"], S3WQ_VLM_FALLBACK="none", S3WQ_VLM_MAX_PAGE_RETRIES="2")
    (record,) = out["records"]
    assert out["input_error_count"] == 1 and "no fallback is set" in record["error"]
    assert "page 1" in record["error"] and "page 2" in record["error"]


def test_a_rotated_page_is_asked_again_turned_as_the_model_says(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        standin.script(Step("rotated", rotation=90))
        out = run(ocr_python, tmp_path, standin, "vlm", docs["table.pdf"])
        sent = standin.requests()
    (record,) = out["records"]
    (page,) = record["metadata"]["pages"]
    assert [r.rotation for r in sent] == [0, 90] and (sent[1].width, sent[1].height) == (sent[0].height, sent[0].width)
    assert page["rotation"] == 90 and page["attempts"] == 2 and not page.get("is_fallback")
    assert record["attributes"]["is_rotation_valid"] == [True]


def test_a_slow_model_past_the_runs_time_falls_back_within_the_run(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL) as standin:
        standin.script(Step("slow", seconds=60))
        out = run(ocr_python, tmp_path, standin, "vlm", docs["table.pdf"], OCR_TEST_RUN_SECONDS="15")
    (record,) = out["records"]
    (page,) = record["metadata"]["pages"]
    assert out["run_seconds"] < 15 and page["is_fallback"] and "time ran out" in page["reason"]
    assert "Anchor" in record["text"]


@pytest.mark.parametrize(
    "endpoint, expected",
    [("wrong model", "serves no such model"), ("refused", "not answering")],
)
def test_a_wrong_model_or_a_dead_endpoint_hands_the_group_back_with_nothing_written(ocr_python, tmp_path, docs, endpoint, expected):
    if endpoint == "wrong model":
        with StandIn(model="another/model") as standin:
            out = run(ocr_python, tmp_path, standin, "vlm", docs["layer.pdf"])
    else:
        with socket.socket() as closed:  # a port nothing listens on: connection refused
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        out = run(ocr_python, tmp_path, None, "vlm", docs["layer.pdf"], S3WQ_VLM_ENDPOINT=f"http://127.0.0.1:{port}/v1")
    assert out["raised"] == "ServiceUnavailable" and expected in out["message"]
    assert not [key for key in out["keys"] if key.startswith("results/")]


def test_many_pages_in_flight_stay_under_the_cap_in_bounded_memory(ocr_python, tmp_path, docs):
    with StandIn(model=MODEL, latency=0.3) as standin:
        out = run(ocr_python, tmp_path, standin, "vlm", docs["vlm_long.pdf"], S3WQ_VLM_IN_FLIGHT="8")
        peak, sent = standin.peak_in_flight, len(standin.requests())
    (record,) = out["records"]
    assert sent == 40 and record["metadata"]["pdf-total-pages"] == 40 and "error" not in record
    assert 2 <= peak <= 8  # the pages were spread over the slots, never more than the setting
    # 40 pages of 1,288 pixels and their bodies would be ~40 MB held at once; eight in flight hold a fifth of it.
    assert out["peak_rss_mb"] - out["loaded_rss_mb"] < 150


def test_the_vlm_benchmark_runs_at_a_tiny_size_and_prints_its_json(ocr_python):
    import json
    import subprocess

    from .conftest import REPO_ROOT, ocr_env

    tiny = ["--latency", "0.2", "--in-flight", "1,4", "--pages", "4", "--corpus-size", "none"]
    done = subprocess.run(
        [str(ocr_python), str(REPO_ROOT / "bench" / "vlm.py"), *tiny],
        capture_output=True,
        text=True,
        timeout=300,
        env=ocr_env(),
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert [row["in_flight"] for row in result["throughput"]] == [1, 4]
    assert all(row["pages"] == 4 and row["pages_per_s"] > 0 for row in result["throughput"])
    assert result["throughput"][0]["peak_in_flight_seen_by_endpoint"] == 1
    assert 1 <= result["throughput"][1]["peak_in_flight_seen_by_endpoint"] <= 4
    cost = result["cost_per_million_pages"]
    assert cost["vlm"]["model_usd"] == 176.0 and cost["vlm"]["usd"] > 176.0 and cost["assumptions"]
