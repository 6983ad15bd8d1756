"""The processor's own frame of a failure: picked from the traceback's frame records when the error is caught, and read back strictly.

The worker runs in this process (the in-process runner) on a local
workspace; the processors are real modules written to a folder on sys.path,
so their frames are files on disk, as a user's are. (The processor host's
capture is checked through the real CLI: tests/integration/test_failure_frames.py.)
"""

from __future__ import annotations

import json
import textwrap

import pytest

import s3wq.processors.builtins
from s3wq.config import WorkerSettings
from s3wq.index import WorkIndex
from s3wq.ops.inspection import list_failures
from s3wq.processors import load_processor
from s3wq.protocol import tracebacks
from s3wq.protocol.bodies import MAX_ATTEMPT, error_frame
from s3wq.store import layout
from s3wq.worker import Worker


def write_module(root, name: str, source: str) -> None:
    path = root.joinpath(*name.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip())


@pytest.fixture
def code_dir(tmp_path, monkeypatch):
    """A folder on sys.path for the processors of a test (and the modules it imports fresh)."""
    root = tmp_path / "code"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root


@pytest.fixture
def site_dir(tmp_path, monkeypatch):
    """A folder that counts as installed packages, as site-packages does."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    library = tracebacks._library_dirs()
    monkeypatch.setattr(tracebacks, "_library_dirs", lambda: (*library, str(site.resolve())))
    return site


def fail_one_group(backend, processor) -> dict:
    WorkIndex(backend).populate(["s3://inputs/a.json"], 1)
    report = Worker(backend, processor, WorkerSettings(time_limit=60, max_attempts=1, breaker_groups=0), worker_id="w1").run()
    assert report.failed == 1
    [hash_] = [g.hash for g in WorkIndex(backend).iter_groups()]
    return json.loads(backend.read(layout.failed_key(hash_)).body)


def test_the_frame_is_the_deepest_line_of_the_processors_package_not_the_json_module(local_backend, code_dir):
    write_module(code_dir, "ocrpkg/__init__.py", "")
    write_module(
        code_dir,
        "ocrpkg/parse.py",
        """
        import json

        def decode(raw):
            return json.loads(raw)
        """,
    )
    write_module(
        code_dir,
        "ocrpkg/proc.py",
        """
        from ocrpkg.parse import decode

        def process(group, ctx):
            decode("not json")
        """,
    )

    flag = fail_one_group(local_backend, load_processor("ocrpkg.proc:process"))

    assert flag["error"].startswith("json.decoder.JSONDecodeError")
    deepest = [line for line in flag["traceback"].splitlines() if line.lstrip().startswith("File ")][-1]
    assert "json/decoder.py" in deepest  # the end of the stack is the library's
    assert flag["error_frame"] == {"file": "ocrpkg/parse.py", "line": 4, "function": "decode", "code": "return json.loads(raw)"}


def test_a_library_the_processor_calls_is_not_its_own_code(local_backend, code_dir, site_dir):
    write_module(
        site_dir,
        "vendorlib.py",
        """
        def parse(raw):
            raise ValueError(f"vendorlib cannot parse {raw!r}")
        """,
    )
    write_module(
        code_dir,
        "userproc.py",
        """
        import vendorlib

        def process(group, ctx):
            for path in group.paths:
                vendorlib.parse(path)
        """,
    )

    flag = fail_one_group(local_backend, load_processor("userproc:process"))

    assert "vendorlib.py" in flag["traceback"]
    assert flag["error_frame"] == {"file": "userproc.py", "line": 5, "function": "process", "code": "vendorlib.parse(path)"}


def test_a_processor_installed_as_a_package_still_owns_its_frames(local_backend, site_dir):
    write_module(site_dir, "installedproc/__init__.py", "")
    write_module(
        site_dir,
        "installedproc/run.py",
        """
        def process(group, ctx):
            raise KeyError("model.bin")
        """,
    )

    flag = fail_one_group(local_backend, load_processor("installedproc.run:process"))

    assert flag["error_frame"] == {"file": "installedproc/run.py", "line": 2, "function": "process", "code": 'raise KeyError("model.bin")'}


def test_a_built_in_processor_owns_its_module_not_all_of_s3wq():
    assert tracebacks.processor_roots(load_processor("text")) == (str(tracebacks.os.path.realpath(s3wq.processors.builtins.__file__)),)


# --- reading it back ---------------------------------------------------------------------------------


GOOD = {"file": "failproc.py", "line": 12, "function": "process", "code": "data = json.loads(raw)"}


@pytest.mark.parametrize(
    "frame, read",
    [
        (GOOD, GOOD),
        ({k: v for k, v in GOOD.items() if k != "code"}, {k: v for k, v in GOOD.items() if k != "code"}),
        (None, None),  # a flag written before s3wq recorded the frame
        ("failproc.py:12", None),
        ({**GOOD, "line": True}, None),
        ({**GOOD, "line": -1}, None),
        ({**GOOD, "line": 1.5}, None),
        ({**GOOD, "line": "12"}, None),
        ({**GOOD, "line": MAX_ATTEMPT * 10**6}, None),
        ({**GOOD, "file": 5}, None),
        ({**GOOD, "function": None}, None),
        ({**GOOD, "code": ["x"]}, None),
    ],
)
def test_a_flags_frame_is_read_strictly(frame, read):
    doc = {"hash": "0" * 40} if frame is None else {"hash": "0" * 40, "error_frame": frame}
    assert error_frame(doc) == read


def test_a_huge_frame_is_cut_to_size():
    read = error_frame({"error_frame": {**GOOD, "file": "x" * 10**6, "code": "y" * 10**6, "function": "z" * 10**6}})
    assert (len(read["file"]), len(read["code"]), len(read["function"])) == (
        tracebacks.MAX_FRAME_FILE_CHARS,
        tracebacks.MAX_FRAME_CODE_CHARS,
        tracebacks.MAX_FRAME_FUNCTION_CHARS,
    )


def test_failures_lists_older_and_hostile_flags_without_a_frame(local_backend):
    WorkIndex(local_backend).populate(["s3://inputs/a", "s3://inputs/b", "s3://inputs/c"], 1)
    hashes = sorted(g.hash for g in WorkIndex(local_backend).iter_groups())
    old = {"paths": ["s3://inputs/a"], "attempts": 3, "kind": "error", "error": "E", "traceback": "Traceback ...\nE\n"}
    flags = [old, {**old, "error_frame": {**GOOD, "line": "12; rm -rf /"}}, {**old, "error_frame": GOOD}]
    for hash_, flag in zip(hashes, flags):
        local_backend.write(layout.failed_key(hash_), json.dumps({"hash": hash_, **flag}).encode())

    failures = {f["hash"]: f for f in list_failures(local_backend)}

    assert [failures[h]["error_frame"] for h in hashes] == [None, None, GOOD]
    assert all(failures[h]["traceback"] == old["traceback"] for h in hashes)
