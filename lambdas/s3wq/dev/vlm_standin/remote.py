"""A stand-in in another process, driven over its own routes: ``RemoteStandIn("http://127.0.0.1:PORT/v1")``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from .journal import Record
from .script import Step


class RemoteStandIn:
    """The Python calls of ``StandIn`` that drive and read it (script, requests, refusals, peak, reset), over HTTP."""

    def __init__(self, url: str, timeout: float = 30.0):
        base = url.rstrip("/")
        self.root = base[: -len("/v1")] if base.endswith("/v1") else base
        self.timeout = timeout

    def _call(self, method: str, route: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.root}/_standin/{route}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise ValueError(f"the stand-in refused {route}: {json.loads(error.read()).get('message')}") from None

    def script(self, *steps: Step | str | dict, default: Step | str | dict | None = None) -> int:
        order: dict[str, Any] = {"steps": [Step.from_json(step).to_json() for step in steps]}
        if default is not None:
            order["default"] = Step.from_json(default).to_json()
        return int(self._call("POST", "script", order)["queued"])

    def status(self) -> dict[str, Any]:
        return self._call("GET", "requests")

    def requests(self) -> list[Record]:
        return [Record.from_json(record) for record in self.status()["requests"]]

    def refusals(self) -> list[Record]:
        return [record for record in self.requests() if record.refused]

    @property
    def peak_in_flight(self) -> int:
        return int(self.status()["peak_in_flight"])

    def reset(self) -> None:
        self._call("POST", "reset", {})
