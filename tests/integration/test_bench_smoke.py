"""Every benchmark under bench/ runs at a tiny size, as a user runs it, and prints the JSON docs/performance.md quotes.

Nothing here is timed: a shared CI machine would make any time limit flaky.
What is checked is each benchmark's output and its correctness figures (no
group processed twice by s3wq, every group done, populate idempotent, each
starting worker got a group of its own); the figures themselves are measured
at full size and quoted in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT

BENCH_DIR = REPO_ROOT / "bench"
# Generous: a tiny run takes seconds, but CI's two cores may be busy.
BENCH_TIMEOUT_SECONDS = 180


def run_bench(script: str, *args: str) -> dict:
    # A session of its own: on a timeout the benchmark's S3 server and
    # worker processes are stopped with it, not left behind.
    proc = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=BENCH_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON object on stdout, got {len(lines)} lines"
    return json.loads(lines[0])


@pytest.fixture(scope="module")
def contention_json(tmp_path_factory) -> Path:
    """One tiny contention run, shared by its own test and the cost test that reads it."""
    result = run_bench("contention.py", "--workers", "1,3", "--work-ms", "0", "--max-groups", "12")
    path = tmp_path_factory.mktemp("bench") / "contention.json"
    path.write_text(json.dumps(result))
    return path


@pytest.mark.parametrize(
    "script",
    [
        "contention.py",
        "populate.py",
        "start.py",
        "coldstart.py",
        "cost.py",
        "olmocr_memory.py",
        "status_scale.py",
        "host_overhead.py",
        "doc_quality.py",
        "doc_corpus.py",
        "export.py",
        "vlm.py",
    ],
)
def test_every_benchmark_has_help_with_an_example(script):
    done = subprocess.run([sys.executable, str(BENCH_DIR / script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"bench/{script}" in done.stdout


def test_contention_processes_every_group_and_s3wq_none_twice(contention_json):
    result = json.loads(contention_json.read_text())

    assert result["queues"] == ["s3wq", "s3wq-unindexed", "olmocr"]
    assert result["olmocr"] == "0.4.27"  # the published package, not a stand-in
    assert [(r["endpoint"], r["workers"]) for r in result["runs"]] == [("cpu", 1), ("cpu", 3), ("latency", 1), ("latency", 3)]
    for row in result["runs"]:
        queues = ["s3wq", "olmocr"] + (["s3wq-unindexed"] if row["workers"] > 1 else [])
        for name in queues:
            run = row[name]
            assert run["groups_processed"] == run["groups_done"] == 12
            measured = {"groups_per_second", "requests_per_group_by_operation", "client_cpu_ms_per_group", "server_cpu_ms_per_group"}
            assert measured <= set(run)
        assert row["s3wq"]["duplicate_processing"] == 0
        assert set(row["ratio"]) == set(queues) - {"olmocr"}
    for uncontended in (row["s3wq"] for row in result["runs"] if row["workers"] == 1):
        # PUT lock, HEAD done flag, PUT done flag, DELETE lock.
        assert uncontended["marginal_requests_per_group"] == 4.0
    assert {t["target"] for t in result["targets"]} >= {"duplicate processing, s3wq, every run"}


def test_populate_adds_each_path_once_and_writes_the_same_index_on_both_backends():
    result = run_bench("populate.py", "--paths", "3000", "--group-size", "10")

    local, s3 = result["backends"]["local"], result["backends"]["s3"]
    for phases in (local, s3):
        assert (phases["first"]["added_paths"], phases["first"]["added_groups"]) == (3000, 300)
        assert (phases["again"]["added_paths"], phases["again"]["already_indexed"]) == (0, 3000)
        assert (phases["grown"]["added_paths"], phases["grown"]["already_indexed"]) == (300, 3000)
        assert all(p["peak_rss_mb"] > 0 and p["seconds"] >= 0 for p in phases.values())
    assert [p["index_bytes"] for p in local.values()] == [p["index_bytes"] for p in s3.values()]
    assert s3["again"]["s3_requests"].get("PutObject", 0) == 0


def test_start_gives_each_worker_its_own_group_and_costs_the_same_at_every_size():
    result = run_bench("start.py", "--groups", "300,600", "--workers", "2,3")

    for size in result["sizes"]:
        assert size["done"] == size["groups"] // 2
        for run in size["runs"]:
            assert run["distinct_groups_claimed"] == run["workers"]
        assert size["olmocr"]["requests_until_ready"] > 0
    one_worker = [size["one_worker"]["requests_until_ready"] for size in result["sizes"]]
    assert one_worker[0] == one_worker[1]
    assert result["scaling"]["interaction"] is not None


def test_coldstart_times_each_handler_import():
    result = run_bench("coldstart.py", "--runs", "1", "--env", "local", "--no-bundle")

    handlers = result["imports"]["local"]
    assert set(handlers) == {"s3wq.handlers.populate", "s3wq.handlers.worker", "s3wq.handlers.status"}
    assert all(h["median_ms"] > 0 for h in handlers.values())
    assert "bundle" not in result


def test_host_overhead_times_runs_in_a_host_against_the_in_process_floor():
    result = run_bench("host_overhead.py", "--runs", "5")
    shapes = result["shapes"]
    assert set(shapes) == {"noop", "child", "in-process"} and all(s["runs"] == 5 for s in shapes.values())
    # A run in a host costs more than the call itself, and one that starts a process more than one that does not.
    assert shapes["noop"]["median_ms"] > shapes["in-process"]["median_ms"]
    assert shapes["child"]["overhead_median_ms"] > 0


def test_cost_prices_every_queue_from_a_contention_result(contention_json):
    result = run_bench("cost.py", "--contention", str(contention_json))

    assert result["prices_as_of"]
    for row in result["runs"]:
        assert set(row) >= {"s3wq", "olmocr", "sqs_lambda"}
        assert all(row[q]["dollars_total"] > 0 for q in ("s3wq", "olmocr", "sqs_lambda"))
        # Three SQS requests and one Lambda request per group.
        assert row["sqs_lambda"]["dollars_total"] == 1.4


def test_olmocr_memory_measures_a_real_worker_on_an_olmocr_index():
    result = run_bench("olmocr_memory.py", "--paths", "3000,6000", "--max-groups", "5")

    assert [r["paths"] for r in result["runs"]] == [3000, 6000]
    for run in result["runs"]:
        assert run["groups"] == run["paths"] // 10 and run["index_bytes"] > 0
        assert run["index_text_bytes"] > run["index_bytes"]
        assert run["worker_report"]["processed"] >= 5 and run["groups_done"] >= 5
        assert run["seconds_to_first_claim"] > 0
        # The worker and, beside it, its processor host (a warden and the runner it forks) were measured.
        assert 0 < run["worker_peak_rss_mb"] < run["total_peak_rss_mb"]
    assert [t["met"] for t in result["targets"]] == [True, True]


def test_scale_model_counts_the_protocol_requests_and_flags_a_prefix_over_its_limit():
    done = subprocess.run([sys.executable, str(BENCH_DIR / "scale.py"), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "bench/scale.py" in done.stdout, done.stderr
    # 2,000 groups on 10 and on 40 workers; 10,000 groups on 1,000 workers, swept to a processing time S3 cannot keep up with.
    result = run_bench("scale.py", "--sizes", "20000:10,20000:40,100000:1000", "--sweep", "0.01,60", "--calibrate-paths", "5000")

    assert result["calibration"]["source"].startswith("built-in")
    few, more, many = result["sizes"]
    for size in result["sizes"]:
        drain = size["phases"]["drain"]
        # Lock PUT, done-flag HEAD, done-flag PUT, lock DELETE; collisions and segment loads only add to them.
        assert drain["uncontended_requests_per_group"] == {"DeleteObject": 1.0, "HeadObject": 1.0, "PutObject": 2.0}
        assert all(drain["requests_per_group"][op] >= n for op, n in drain["uncontended_requests_per_group"].items())
        # One done flag per group, whatever the contention.
        assert drain["rates_per_second"]["done_flags/"]["PutObject"] == pytest.approx(drain["groups_per_second"], abs=0.02)
        # Each worker: catalog, olmocr's index, its first segment and two LISTs of its flags, then a lock PUT and a HEAD.
        assert size["phases"]["worker_start"]["requests_total"] == 7 * size["workers"]
        for phase in size["phases"].values():
            hot = phase["hottest"]
            assert phase["exceeds_limit"] == (hot["rate_per_second"] > hot["limit"])
            assert hot["partitions_needed"] == max(1, -(-hot["rate_per_second"] // hot["limit"]))
        assert 0 < size["cost"]["queue_usd_total"] < size["cost"]["total_usd"]
    assert few["groups"] == more["groups"] == 2000
    assert more["phases"]["drain_loop"]["wall_seconds"] < few["phases"]["drain_loop"]["wall_seconds"]
    assert not any(phase["exceeds_limit"] for size in (few, more) for phase in size["phases"].values())

    sweep = {row["group_seconds"]: row for row in many["sweep"]}
    hot = sweep[0.01]["hottest"]
    assert sweep[0.01]["exceeds_limit"] and hot["prefix"] == "worker_locks/" and hot["partitions_needed"] >= 2
    assert hot["rate_per_second"] >= 2 * sweep[0.01]["groups_per_second"]  # a lock PUT and DELETE per group
    assert not sweep[60.0]["exceeds_limit"]
    flagged = [f for f in result["flags"] if f["phase"] == "drain" and f["group_seconds"] == 0.01]
    assert [(f["workers"], f["prefix"], f["partitions_needed"]) for f in flagged] == [(1000, "worker_locks/", hot["partitions_needed"])]


def test_status_scale_counts_what_it_filled_and_models_the_big_sizes():
    result = run_bench("status_scale.py", "--groups", "3000")

    # The benchmark itself fails unless status and failures read back exactly what it filled.
    status = result["status"]["status"]
    assert (status["groups"], status["done"], status["failed"], status["locked"], status["released"]) == (3000, 1800, 30, 2, 1)
    assert result["failures"]["failures"] == 30
    # 3,000 groups: 16 partitions, three LISTs each (none past a page); the
    # catalog (before and after the flags), olmocr's index, the three unflagged locks.
    assert result["partitions"] == 16
    assert result["status"]["s3_requests"] == {"GetObject": 6, "ListObjectsV2": 48}
    assert [row["status"]["groups"] for row in result["model"]["extrapolated"]] == [1_000_000, 10_000_000]
    assert all(
        row["status"]["seconds"] > 0 and row["status"]["bound_by"] in ("latency", "chain", "cpu") for row in result["model"]["extrapolated"]
    )
    assert result["status"]["peak_rss_mb"] > 0


def test_fanout_runs_one_worker_invocation_per_map_item_and_drains_the_queue():
    result = run_bench("fanout.py", "--workers", "6", "--groups", "4", "--concurrency", "4")["result"]

    assert (result["execution_status"], result["error"]) == ("SUCCEEDED", None)
    assert (result["output"]["done"], result["output"]["remaining"], result["output"]["failed"]) == (4, 0, 0)
    assert (result["worker_invocations"], result["distinct_worker_indexes"]) == (6, 6)
