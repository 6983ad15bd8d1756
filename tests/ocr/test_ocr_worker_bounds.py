"""One input cannot sink its group (issue #27): ``s3wq work --processor ocr`` on inputs built to (hostile.py), beside good scans.

The memory bombs run in a memory cgroup the size of the ocr profile's
Lambda worker, the whole worker inside it, as on Lambda: there, before the
decoder, the OOM killer took the processor host on every attempt and the
group failed with its good inputs. The blank pages run in a run of a few
seconds, as a Lambda run too short for them would be.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from support import run_cli

from s3wq.processors.ocr.settings import DEFAULT_MAX_DECODE_MB
from s3wq_cdk.settings import PROCESSOR_PROFILES

from .conftest import ocr_env, once_per_session, run_in_ocr_venv

WORKER_MB = PROCESSOR_PROFILES["ocr"].worker_memory_mb
CAP = f"the decoder's memory cap of {DEFAULT_MAX_DECODE_MB} MB (S3WQ_OCR_MAX_DECODE_MB)"
# Each group: good scans (scans.py, with known text) around the input meant to sink it.
GROUPS = {
    "flate": ["1-scan.pdf", "2-flate-bomb.pdf", "3-page.png", "4-fax.tiff"],
    "jpeg": ["1-page.jpg", "2-cmyk.jpg", "3-columns.png", "4-mixed.pdf"],
}
BLANK_GROUP = [f"{n}-blank-pages.pdf" for n in range(1, 6)]  # the ocr profile's group size
RUN_SECONDS = 10


@pytest.fixture(scope="session")
def hostile(ocr_python, tmp_path_factory) -> Path:
    made = once_per_session(
        tmp_path_factory,
        "ocr-hostile",
        lambda folder: {"folder": str(folder), "files": run_in_ocr_venv(ocr_python, "hostile.py", str(folder))},
    )
    return Path(made["folder"])


def _memory_cgroup(megabytes: int) -> tuple[Path, str]:
    """A new memory cgroup below this process's own, of ``megabytes`` with no swap beyond it, and its file that counts OOM kills.

    Raises OSError where this machine will not make one (no memory controller, not writable).
    """
    name = f"s3wq-test-{uuid.uuid4().hex[:8]}"
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, own = line.split(":", 2)
        if "memory" in controllers.split(","):  # cgroup v1
            group = Path("/sys/fs/cgroup/memory") / own.lstrip("/") / name
            group.mkdir()
            (group / "memory.limit_in_bytes").write_text(str(megabytes << 20))
            if (group / "memory.memsw.limit_in_bytes").exists():
                (group / "memory.memsw.limit_in_bytes").write_text(str(megabytes << 20))
            return group, "memory.oom_control"
        if controllers == "" and "memory" in (Path("/sys/fs/cgroup") / own.lstrip("/") / "cgroup.subtree_control").read_text():
            group = Path("/sys/fs/cgroup") / own.lstrip("/") / name  # cgroup v2
            group.mkdir()
            (group / "memory.max").write_text(str(megabytes << 20))
            (group / "memory.swap.max").write_text("0")
            return group, "memory.events"
    raise OSError("this process is in no memory cgroup")


@pytest.fixture(scope="module")
def worker_sized_cgroup():
    """A memory cgroup the size of the ocr profile's worker; a skip, saying why, on a machine that cannot make one."""
    try:
        group, events = _memory_cgroup(WORKER_MB)
    except OSError as exc:
        pytest.skip(f"no memory cgroup of {WORKER_MB} MB can be made here ({exc}): the memory bombs need one to stand for the worker")
    yield group, events
    for _ in range(50):  # the kernel lets a cgroup go a moment after its last process has
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def _populate(workspace: Path, folder: Path, names: list[str], scans: Path, hostile: Path) -> None:
    folder.mkdir(parents=True)
    for name in names:
        stem = name.split("-", 1)[1]
        shutil.copy((hostile if (hostile / stem).exists() else scans) / stem, folder / name)
    assert run_cli("populate", str(workspace), f"{folder}/*", "--group-size", str(len(names))).returncode == 0


def _records(workspace: Path) -> dict[str, dict]:
    lines = [json.loads(line) for path in (workspace / "results").iterdir() for line in path.read_text().splitlines()]
    return {Path(record["source"]).name: record for record in lines}


def _work(python: Path, workspace: Path, *args: str, prefix: tuple[str, ...] = (), **env: str) -> dict:
    """``s3wq work`` from the OCR venv, each group tried once (before the decoder, the bombs failed every attempt alike): its report."""
    work = subprocess.run(
        [*prefix, str(python), "-m", "s3wq", "work", str(workspace), "--processor", "ocr", "--json", "--max-attempts", "1", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=ocr_env(**env),
    )
    assert work.returncode == 0, work.stdout + work.stderr[-3000:]
    return json.loads(work.stdout)


@pytest.fixture(scope="module")
def bombed(ocr_python, scans, hostile, worker_sized_cgroup, tmp_path_factory) -> dict:
    """Both bomb groups, worked by one ``s3wq work`` whose every process is in the worker-sized cgroup."""
    group, events = worker_sized_cgroup
    workspace, inputs = tmp_path_factory.mktemp("bombed") / "ws", tmp_path_factory.mktemp("bombed-inputs")
    for kind, names in GROUPS.items():
        _populate(workspace, inputs / kind, names, scans[0], hostile)
    in_cgroup = ("sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"))
    report = _work(ocr_python, workspace, prefix=in_cgroup)
    oom_kills = int(re.search(r"^oom_kill (\d+)$", (group / events).read_text(), re.M).group(1))
    return {"report": report, "records": _records(workspace), "oom_kills": oom_kills, "known": scans[1]}


def _assert_good_inputs_read(bombed: dict, names: list[str]) -> None:
    for name in names:
        record = bombed["records"][name]
        assert "error" not in record, record["error"]
        first_line = bombed["known"][name.split("-", 1)[1]][0][0]
        assert first_line in record["text"], record["text"]


def test_a_flate_bomb_is_its_inputs_error_and_the_group_is_done_with_the_good_inputs_read(bombed):
    assert bombed["oom_kills"] == 0  # the worker's processes all lived: only the decoder met its cap
    assert (bombed["report"]["processed"], bombed["report"]["failed"], bombed["report"]["leftovers"]) == (2, 0, 0), bombed["report"]
    bomb = bombed["records"]["2-flate-bomb.pdf"]
    assert bomb["error"] == f"page 1: decoding it needed more than {CAP}"
    assert bomb["metadata"]["bytes"] < 2_000_000 and bomb["metadata"]["pages"] == []
    _assert_good_inputs_read(bombed, ["1-scan.pdf", "3-page.png", "4-fax.tiff"])


def test_a_progressive_cmyk_jpeg_past_the_memory_cap_is_refused_from_its_header(bombed):
    jpeg = bombed["records"]["2-cmyk.jpg"]

    assert re.fullmatch(
        rf"page 1 is 8888x8888 pixels, a progressive CMYK JPEG: decoding it takes about \d+ MB, "
        rf"more than the \d+ MB the decoder has free under its memory cap of {DEFAULT_MAX_DECODE_MB} MB \(S3WQ_OCR_MAX_DECODE_MB\)",
        jpeg["error"],
    ), jpeg["error"]
    assert jpeg["metadata"]["pages"] == []
    _assert_good_inputs_read(bombed, ["1-page.jpg", "3-columns.png", "4-mixed.pdf"])


def test_a_group_too_long_for_its_run_is_done_within_it_each_input_saying_how_far_it_got(ocr_python, scans, hostile, tmp_path):
    workspace = tmp_path / "ws"
    _populate(workspace, tmp_path / "blank", BLANK_GROUP, scans[0], hostile)

    # Every page read (no page cap to stop at first): only the run's time bounds them.
    report = _work(ocr_python, workspace, "--group-timeout", str(RUN_SECONDS), S3WQ_OCR_MAX_PAGES="100000")

    assert (report["processed"], report["timed_out"], report["failed"], report["leftovers"]) == (1, 0, 0, 0), report
    records = _records(workspace)
    assert sorted(records) == BLANK_GROUP  # the result is written, a record for every input
    for name in BLANK_GROUP:
        record = records[name]
        stop = re.match(
            r"stopped after (\d+) of 100000 pages: its share of the run's time \((\d+) s\) ran out; use smaller groups or a longer run",
            record["error"],
        )
        assert stop, record["error"]
        assert int(stop.group(1)) == len(record["metadata"]["pages"]) > 0
        assert 0 < int(stop.group(2)) < RUN_SECONDS
        assert {page["method"] for page in record["metadata"]["pages"]} == {"blank"}  # no page was OCR'd


def test_a_page_still_decoding_when_its_share_ends_is_stopped_and_the_next_input_is_read(ocr_python, scans, hostile, tmp_path):
    # Under a cap that lets pdfium go on inflating (it takes seconds to reach 1 GiB), the input's share ends first.
    run = run_in_ocr_venv(
        ocr_python,
        "run_group.py",
        str(tmp_path / "ws"),
        str(hostile / "flate-bomb.pdf"),
        str(scans[0] / "page.png"),
        OCR_TEST_RUN_SECONDS="2",
        S3WQ_OCR_MAX_DECODE_MB="8192",
    )

    bomb, page = run["records"]
    assert re.fullmatch(
        r"stopped after 0 of 1 pages: its share of the run's time \(under 1 s\) ran out while page 1 was being decoded; "
        r"use smaller groups or a longer run",
        bomb["error"],
    ), bomb["error"]
    assert "error" not in page and scans[1]["page.png"][0][0] in page["text"]  # read by a new decoder
