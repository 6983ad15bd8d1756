"""A processor whose own line hands bad input to json.loads: the error is raised deep in the standard library.

Line numbers matter: tests check that ``s3wq failures`` names line PARSE_LINE first.
"""

from __future__ import annotations

import json

PARSE_LINE = 16


def parse_inputs(group, ctx) -> None:
    for path in group.paths:
        raw = ctx.read_input(path)
        data = json.loads(raw)
        ctx.write_result([{"path": path, "keys": sorted(data)}])
