"""The stand-in for olmocr's model, over real HTTP: its answers, its refusals, its behaviours, its slots, its CLI.

Requests are built as olmocr 0.4.27's build_page_query builds them, the pages drawn as PNGs by hand
(tests/helpers/png_images.py); the client is http.client, one connection a request, as olmocr's apost is.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from helpers.png_images import encode, page_png, page_rows, turned

from s3wq.dev.vlm_standin import RemoteStandIn, StandIn, Step
from s3wq.processors.vlm.prompt import PROMPT  # olmocr's, which the stand-in requires by default

MODEL = "test/olmocr-standin"

FIELDS = {"primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram"}


def query(png: bytes, *, model: str = MODEL, temperature: Any = 0.1, max_tokens: Any = 8000, prompt: str = PROMPT) -> dict[str, Any]:
    """A page's request as olmocr's build_page_query and try_single_page make it."""
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    content = [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": url}}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": temperature}


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def content(self) -> str:
        return self.body["choices"][0]["message"]["content"]

    def front_matter(self) -> tuple[dict[str, Any], str]:
        """The answer read as olmocr reads it: YAML between the first two ``---`` lines, then the text."""
        assert self.content.startswith("---\n"), self.content
        end = self.content.find("\n---", 4)
        return yaml.safe_load(self.content[4:end]), self.content[end + 4 :].strip()


def call(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 30) -> Reply:
    """One request on a connection of its own; ``path`` under the server's root (``/v1/...``, ``/_standin/...``)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        raw = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(raw) if raw else None)
    finally:
        connection.close()


def complete(url: str, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return call(url, "POST", "/v1/chat/completions", body, headers)


# --- one stand-in in this process, one in a process of its own (python -m), driven alike -----------------------------


@dataclass
class Driven:
    url: str
    script: Callable[..., Any]
    remote: RemoteStandIn


def _script_over_http(url: str) -> Callable[..., Any]:
    def script(*steps: Any, default: Any = None) -> None:
        order: dict[str, Any] = {"steps": [step.to_json() if isinstance(step, Step) else step for step in steps]}
        if default is not None:
            order["default"] = default.to_json() if isinstance(default, Step) else default
        reply = call(url, "POST", "/_standin/script", order)
        assert reply.status == 200, reply.body

    return script


@pytest.fixture
def standin_process() -> Iterator[tuple[subprocess.Popen, str]]:
    command = [sys.executable, "-m", "s3wq.dev.vlm_standin", "--model", MODEL, "--max-in-flight", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert "not a model" in line, (line, process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield process, line.split(" at ")[-1].strip()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


@pytest.fixture(params=["in_process", "subprocess"])
def driven(request: pytest.FixtureRequest) -> Iterator[Driven]:
    if request.param == "in_process":
        with StandIn(model=MODEL) as standin:
            yield Driven(standin.url, standin.script, RemoteStandIn(standin.url))
    else:
        _, url = request.getfixturevalue("standin_process")
        yield Driven(url, _script_over_http(url), RemoteStandIn(url))


def test_an_answer_is_olmocrs_front_matter_then_text_in_vllms_body() -> None:
    with StandIn(model=MODEL) as standin:
        first, again, other = (complete(standin.url, query(png)) for png in (page_png(1), page_png(1), page_png(2)))
        models = call(standin.url, "GET", "/v1/models")
    assert first.status == 200 and first.body["object"] == "chat.completion" and first.body["model"] == MODEL
    assert first.body["id"].startswith("chatcmpl-") and first.body["choices"][0]["finish_reason"] == "stop"
    fields, text = first.front_matter()
    assert fields == {"primary_language": "en", "is_rotation_valid": True, "rotation_correction": 0, "is_table": False, "is_diagram": False}
    sha1 = hashlib.sha1(page_png(1)).hexdigest()
    assert "Stand-in" in text and "1288x24" in text and sha1[:12] in text
    assert again.content == first.content and other.content != first.content
    usage = first.body["usage"]
    assert usage["prompt_tokens"] == math.ceil(1288 * 24 / 784) + len(PROMPT.split())
    assert usage["completion_tokens"] == math.ceil(len(first.content) / 4)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert models.status == 200 and [entry["id"] for entry in models.body["data"]] == [MODEL]
    record = standin.requests()[0]
    assert (record.model, record.temperature, record.width, record.height, record.sha1) == (MODEL, 0.1, 1288, 24, sha1)
    assert (record.behaviour, record.status, record.refused, record.page) == ("ok", 200, False, sha1[:12])


def test_each_behaviour_is_answered_as_scripted(driven: Driven) -> None:
    driven.script(
        "ok",
        Step("status", status=503, retry_after=2),
        Step("slow", seconds=0.3),
        "malformed",
        Step("rotated", rotation=90),
        "length",
        "too_long",
        "drop",
        "table",
        default=Step("status", status=429),
    )
    replies: list[Reply | None] = []
    for seed in range(10):
        try:
            replies.append(complete(driven.url, query(page_png(100 + seed))))
        except (http.client.RemoteDisconnected, ConnectionError):
            replies.append(None)
    ok, status, slow, malformed, rotated, length, too_long, dropped, table, default = replies
    assert ok and ok.front_matter()[0]["is_rotation_valid"] is True
    assert status and status.status == 503 and status.headers["retry-after"] == "2"
    assert status.body == {
        "object": "error",
        "message": status.body["message"],
        "type": "ServiceUnavailableError",
        "param": None,
        "code": 503,
    }
    assert slow and slow.status == 200 and set(slow.front_matter()[0]) == FIELDS
    assert malformed and malformed.status == 200 and set(malformed.front_matter()[0]) < FIELDS  # fields missing
    assert rotated and rotated.front_matter()[0] == {**ok.front_matter()[0], "is_rotation_valid": False, "rotation_correction": 90}
    assert length and length.body["choices"][0]["finish_reason"] == "length" and length.body["usage"]["completion_tokens"] == 8000
    assert too_long and too_long.body["usage"]["total_tokens"] > 16384
    assert too_long.body["choices"][0]["finish_reason"] == "stop"
    assert dropped is None
    assert table and table.front_matter()[0]["is_table"] is True and "<table>" in table.front_matter()[1]
    assert default and default.status == 429 and default.body["type"] == "TooManyRequestsError"
    records = driven.remote.requests()
    behaviours = ["ok", "status", "slow", "malformed", "rotated", "length", "too_long", "drop", "table", "status"]
    assert [record.behaviour for record in records] == behaviours
    assert [record.status for record in records] == [200, 503, 200, 200, 200, 200, 200, None, 200, 429]
    assert not any(record.refused for record in records) and records[2].seconds >= 0.3
    reset = call(driven.url, "POST", "/_standin/reset", {})
    assert reset.status == 200 and complete(driven.url, query(page_png(1))).status == 200  # the default is ok again
    assert [record.number for record in driven.remote.requests()] == [11]


def test_a_bad_step_is_refused_naming_it(driven: Driven) -> None:
    for step, words in [({"behaviour": "sing"}, "no behaviour"), ({"behaviour": "status"}, "needs 'status'"), ("rotated", "needs")]:
        reply = call(driven.url, "POST", "/_standin/script", {"steps": [step]})
        assert reply.status == 400 and words in reply.body["message"]
    reply = call(driven.url, "POST", "/_standin/script", {"steps": [{"behaviour": "rotated", "rotation": 45}]})
    assert reply.status == 400 and "rotation 45" in reply.body["message"]
    assert complete(driven.url, query(page_png(1))).status == 200  # nothing was queued


def _swap_parts(body: dict[str, Any]) -> dict[str, Any]:
    body["messages"][0]["content"].reverse()
    return body


def _with(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**body, **changes}


GOOD = query(page_png(7))
REFUSED: dict[str, tuple[Any, int, str]] = {
    "not JSON": (b"{not json", 400, "not JSON"),
    "not an object": ([GOOD], 400, "not an object"),
    "a wrong model": (query(page_png(7), model="someone/else"), 404, "The model `someone/else` does not exist."),
    "no max_tokens": ({k: v for k, v in GOOD.items() if k != "max_tokens"}, 400, "lacks max_tokens"),
    "a key olmocr never sends": (_with(GOOD, stream=False), 400, "adds stream"),
    "two messages": (_with(GOOD, messages=GOOD["messages"] * 2), 400, "not one"),
    "a system message": (_with(GOOD, messages=[{**GOOD["messages"][0], "role": "system"}]), 400, "user message"),
    "the image first": (_swap_parts(json.loads(json.dumps(GOOD))), 400, "first part is not a text part"),
    "a JPEG": (json.loads(json.dumps(GOOD).replace("data:image/png", "data:image/jpeg")), 400, "does not start"),
    "no base64": (json.loads(json.dumps(GOOD).replace("base64,", "base64,**")), 400, "base64"),
    "not a PNG": (query(b"GIF89a" + bytes(64)), 400, "not a PNG"),
    "a small page": (query(page_png(7, width=1000)), 400, "1000x24: its longest side is not 1288"),
    "a large page": (query(page_png(7, width=1290)), 400, "longest side is not 1288"),
    "another temperature": (query(page_png(7), temperature=0.7), 400, "temperature 0.7"),
    "a boolean temperature": (query(page_png(7), temperature=True), 400, "temperature True"),
    "other max_tokens": (query(page_png(7), max_tokens=4000), 400, "max_tokens 4000"),
    "another prompt": (query(page_png(7), prompt="Read this."), 400, "not olmocr's prompt"),
}


def test_what_olmocr_would_never_send_is_refused_in_vllms_shape_and_recorded() -> None:
    with StandIn(model=MODEL, prompt=PROMPT) as standin:
        standin.script(Step("status", status=500))  # a refused request takes no step
        replies = {case: complete(standin.url, body) for case, (body, _, _) in REFUSED.items()}
        a_pixel_off = complete(standin.url, query(page_png(8, width=1287)))
        then = complete(standin.url, query(page_png(9)))
    for case, (_, status, words) in REFUSED.items():
        reply = replies[case]
        assert reply.status == status and words in reply.body["message"], (case, reply.body)
        assert reply.body["object"] == "error" and reply.body["code"] == status
        assert reply.body["type"] == ("NotFoundError" if status == 404 else "BadRequestError")
    assert a_pixel_off.status == 500 and then.status == 200  # 1287 is within a pixel, and took the scripted step
    refusals = standin.refusals()
    assert len(refusals) == len(REFUSED) and all(record.behaviour is None for record in refusals)
    assert [record.status for record in refusals] == [status for _, status, _ in REFUSED.values()]
    assert [record.error for record in refusals] == [reply.body["message"] for reply in replies.values()]
    assert refusals[2].model == "someone/else" and refusals[13].temperature == 0.7 and refusals[11].width == 1000


def test_an_api_key_is_required_when_set() -> None:
    with StandIn(model=MODEL, api_key="sesame") as standin:
        missing = complete(standin.url, GOOD)
        wrong = complete(standin.url, GOOD, {"Authorization": "Bearer open"})
        right = complete(standin.url, GOOD, {"Authorization": "Bearer sesame"})
        models = call(standin.url, "GET", "/v1/models")
    assert missing.status == wrong.status == models.status == 401 and missing.body["type"] == "AuthenticationError"
    assert right.status == 200 and [record.refused for record in standin.requests()] == [True, True, False]


def test_a_reader_gives_the_text_and_its_failure_is_a_500() -> None:
    def reader(png: bytes) -> str:
        if png == page_png(2):
            raise RuntimeError("no ink")
        return f"read {len(png)} bytes"

    with StandIn(model=MODEL, reader=reader) as standin:
        read, failed = complete(standin.url, query(page_png(1))), complete(standin.url, query(page_png(2)))
    assert read.front_matter()[1] == f"read {len(page_png(1))} bytes"
    assert failed.status == 500 and "no ink" in failed.body["message"] and standin.requests()[1].error


def _many(url: str, count: int) -> list[int]:
    """``count`` page requests at once, each from a thread of its own; their statuses."""
    start = threading.Barrier(count)
    statuses: list[int] = []

    def client(seed: int) -> None:
        start.wait()
        statuses.append(complete(url, query(page_png(seed))).status)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def test_answers_take_their_latency_and_no_more_than_max_in_flight_are_in_progress() -> None:
    with StandIn(model=MODEL, latency=0.25, max_in_flight=3) as capped:
        statuses = _many(capped.url, 20)
        assert statuses == [200] * 20
        assert capped.peak_in_flight == 3 and capped.in_flight == 0
        assert all(record.seconds >= 0.25 for record in capped.requests())
    with StandIn(model=MODEL, latency=0.25) as uncapped:
        assert _many(uncapped.url, 20) == [200] * 20
        assert uncapped.peak_in_flight > 3  # a GPU's batch: answers overlap


def test_a_page_answered_rotated_is_known_when_it_comes_back_turned() -> None:
    rows = page_rows(5, height=16)
    first, turn = encode(rows, 1, [4, 1]), lambda degrees: encode(turned(rows, 1, degrees), 1, [3, 2, 0])
    with StandIn(model=MODEL) as standin:

        def ask(*images: bytes) -> list[Reply]:
            return [complete(standin.url, query(png, temperature=0.2)) for png in images]

        standin.script(Step("rotated", rotation=90), "ok")
        answers = ask(first, turn(90), first, turn(180))
        standin.script(Step("rotated", rotation=180))
        answers += ask(turn(90), turn(270))
        other = complete(standin.url, query(page_png(6)))
    corrections = [(reply.front_matter()[0]["is_rotation_valid"], reply.front_matter()[0]["rotation_correction"]) for reply in answers]
    # 1: turn it 90. 2: turned 90, it is upright (the scripted ok). 3, 4: askew (the default ok), and a model would say
    # how to turn it. 5: upright as far as the last answer went, but scripted rotated 180: upright is now 270 from the
    # first image. 6: turned 270, upright.
    assert corrections == [(False, 90), (True, 0), (False, 90), (False, 270), (False, 180), (True, 0)]
    records = standin.requests()
    assert {record.page for record in records[:6]} == {hashlib.sha1(first).hexdigest()[:12]}
    assert [record.rotation for record in records[:6]] == [0, 90, 0, 180, 90, 270]
    assert (records[1].width, records[1].height) == (16, 1288)
    assert other.front_matter()[0]["is_rotation_valid"] is True and records[6].page != records[0].page


def test_stop_ends_answers_in_progress_and_the_server_at_once() -> None:
    standin = StandIn(model=MODEL, latency=60, max_in_flight=1).start()
    outcomes: list[object] = []

    def client() -> None:
        try:
            outcomes.append(complete(standin.url, query(page_png(1))).status)
        except (http.client.HTTPException, ConnectionError) as exc:
            outcomes.append(type(exc))

    threads = [threading.Thread(target=client) for _ in range(2)]  # one in progress, one waiting for its slot
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while standin.in_flight < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    standin.stop()
    for thread in threads:
        thread.join(timeout=20)
    assert time.monotonic() - started < 10 and len(outcomes) == 2 and 200 not in outcomes
    with pytest.raises(ConnectionError):
        complete(standin.url, GOOD)


def test_the_command_says_it_is_a_stand_in_and_stops_on_ctrl_c(standin_process: tuple[subprocess.Popen, str]) -> None:
    process, url = standin_process
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert complete(url, query(page_png(1))).status == 200 and RemoteStandIn(url).status()["max_in_flight"] == 2
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 0
    assert process.stderr is not None and process.stderr.read() == ""
    shown = subprocess.run([sys.executable, "-m", "s3wq.dev.vlm_standin", "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and "example:" in shown.stdout and "Not a model" in shown.stdout


OLMOCR_PARSES = """
import json, sys
from olmocr.prompts.prompts import PageResponse
from olmocr.train.front_matter import FrontMatterParser
parser = FrontMatterParser(front_matter_class=PageResponse)
for content in json.load(sys.stdin):
    try:
        page = parser._parse_front_matter(*parser._extract_front_matter_and_text(content))
        print(json.dumps([page.is_rotation_valid, page.rotation_correction, page.is_table, page.natural_text[:9]]))
    except ValueError as exc:
        print(json.dumps(str(exc)))
"""


def test_olmocrs_own_parser_reads_the_answers_and_rejects_a_malformed_one(published_olmocr: Path) -> None:
    with StandIn(model=MODEL) as standin:
        standin.script("ok", "table", Step("rotated", rotation=270), "malformed")
        contents = [complete(standin.url, query(page_png(seed))).content for seed in range(4)]
    parsed = subprocess.run(
        [sys.executable, "-c", OLMOCR_PARSES],
        input=json.dumps(contents),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(published_olmocr)},
    )
    assert parsed.returncode == 0, parsed.stderr
    ok, table, rotated, malformed = (json.loads(line) for line in parsed.stdout.splitlines())
    assert ok == [True, 0, False, "Stand-in "] and table == [True, 0, True, "Stand-in "] and rotated == [False, 270, False, "Stand-in "]
    assert "Missing required field" in malformed
