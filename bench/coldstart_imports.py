"""Cold-start import cost of each Lambda handler module, measured in fresh interpreters.

For every handler, each run is a new ``python`` process with
``PYTHONPATH=lambdas`` that times ``import handlers.<name>`` with
``time.perf_counter``; the interpreter's own start-up is not included. One
unmeasured run per handler comes first, so that compiling ``.pyc`` files does
not count. A last run with ``-X importtime`` names the top-level packages
whose modules take the most time (self time, summed per package).

Two environments are measured:

* ``local``: as the tests and the CLI import the handlers (Powertools tracing
  off, so the X-Ray SDK is not imported);
* ``lambda``: ``AWS_LAMBDA_FUNCTION_NAME`` set, as inside Lambda, where
  tracing is on unless the stack sets ``POWERTOOLS_TRACE_DISABLED``.

Prints one JSON object (milliseconds).

    .venv/bin/python bench/coldstart_imports.py
    .venv/bin/python bench/coldstart_imports.py --runs 9 --env local
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

LAMBDAS_DIR = Path(__file__).resolve().parent.parent / "lambdas"
HANDLERS = ["handlers.populate", "handlers.worker", "handlers.status"]
TIMED_IMPORT = "import time, importlib; t = time.perf_counter(); importlib.import_module({module!r}); print(time.perf_counter() - t)"
# Variables that would change what the handlers import, taken out so each run starts from the same place.
_CLEARED_PREFIXES = ("POWERTOOLS_", "AWS_LAMBDA_", "PYTHON")


def child_env(lambda_like: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_PREFIXES)}
    env["PYTHONPATH"] = str(LAMBDAS_DIR)
    if lambda_like:
        env["AWS_LAMBDA_FUNCTION_NAME"] = "s3wq-coldstart-bench"
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return env


def timed_import(module: str, env: dict[str, str]) -> float:
    """Seconds that one fresh interpreter spends importing ``module``."""
    result = subprocess.run(
        [sys.executable, "-c", TIMED_IMPORT.format(module=module)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"importing {module} failed:\n{result.stderr}")
    return float(result.stdout.strip().splitlines()[-1])


def heaviest_packages(module: str, env: dict[str, str], top: int) -> dict[str, float]:
    """Milliseconds spent in each top-level package's own modules (self time, summed), from ``-X importtime``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    self_ms: dict[str, float] = defaultdict(float)
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, _, name = line[len("import time:") :].split("|", 2)
        if own.strip().isdigit():
            self_ms[name.strip().split(".")[0]] += int(own) / 1000
    return dict(sorted(self_ms.items(), key=lambda kv: -kv[1])[:top])


def measure(runs: int, lambda_like: bool, top: int) -> dict:
    env = child_env(lambda_like)
    report = {}
    for module in HANDLERS:
        timed_import(module, env)  # compile .pyc files; not counted
        samples = [timed_import(module, env) * 1000 for _ in range(runs)]
        report[module] = {
            "median_ms": round(statistics.median(samples), 1),
            "min_ms": round(min(samples), 1),
            "max_ms": round(max(samples), 1),
            "self_ms_by_package": {k: round(v, 1) for k, v in heaviest_packages(module, env, top).items()},
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs per handler (default 5); the median is reported")
    parser.add_argument("--env", choices=["local", "lambda", "both"], default="both")
    parser.add_argument("--top", type=int, default=5, help="how many of the heaviest packages to name")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    environments = ["local", "lambda"] if options.env == "both" else [options.env]
    result = {
        "python": platform.python_version(),
        "runs": options.runs,
        **{name: measure(options.runs, name == "lambda", options.top) for name in environments},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
