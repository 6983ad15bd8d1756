"""Cold start: each Lambda handler's import time, and the zipped size of the Lambda bundle.

Import time: for every handler, each run is a new ``python`` process with
``PYTHONPATH=lambdas`` that times ``import s3wq.handlers.<name>`` with
``time.perf_counter``; the interpreter's own start-up is not included. One
unmeasured run per handler comes first, so that compiling ``.pyc`` files does
not count. A last run with ``-X importtime`` names the top-level packages
whose modules take the most time (self time, summed per package). Two
environments are measured:

* ``local``: as the tests and the CLI import the handlers (Powertools tracing
  off, so the X-Ray SDK is not imported);
* ``lambda``: ``AWS_LAMBDA_FUNCTION_NAME`` set, as inside Lambda, where
  tracing is on unless the stack sets ``POWERTOOLS_TRACE_DISABLED``.

Bundle: ``s3wq_cdk.asset_files.build`` (what ``cdk synth`` runs) installs the pinned
requirements for the Lambda platform into a temporary directory (pip, from
PyPI) and copies the handlers beside them; the directory is then zipped
(deflate, level 9) and measured, in all and by top-level package.

Prints one JSON object (milliseconds, bytes).

    .venv/bin/python bench/coldstart.py
    .venv/bin/python bench/coldstart.py --runs 9 --env local --no-bundle
    .venv/bin/python bench/coldstart.py --architecture x86_64 --python-version 3.13
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from pathlib import Path

from common import REPO_ROOT, emit, machine, target

LAMBDAS_DIR = REPO_ROOT / "lambdas"
HANDLERS = ["s3wq.handlers.populate", "s3wq.handlers.worker", "s3wq.handlers.status"]
TIMED_IMPORT = "import time, importlib; t = time.perf_counter(); importlib.import_module({module!r}); print(time.perf_counter() - t)"
# Variables that would change what the handlers import, taken out so each run starts from the same place.
_CLEARED_PREFIXES = ("POWERTOOLS_", "AWS_LAMBDA_", "PYTHON")
# The Lambda runtime ships these; a bundle without them is what a layerless deployment could rely on.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
TARGET_IMPORT_MS = 300.0
TARGET_ZIP_MB = 15.0
MB = 1024 * 1024


# --- import time -------------------------------------------------------------


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


def measure_imports(runs: int, lambda_like: bool, top: int) -> dict:
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


# --- bundle ------------------------------------------------------------------


def zip_directory(source: Path, archive: Path) -> dict[str, int]:
    """Zip ``source`` into ``archive``; return the compressed bytes of each top-level entry."""
    by_package: dict[str, int] = defaultdict(int)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                name = path.relative_to(source).as_posix()
                zf.write(path, name)
                by_package[_package_of(name)] += zf.getinfo(name).compress_size
    return by_package


def _package_of(name: str) -> str:
    top = name.split("/", 1)[0]
    # dist-info directories count with their package.
    return top.split("-", 1)[0].lower() if top.endswith(".dist-info") else top.removesuffix(".py")


def measure_bundle(architecture: str, python_version: str, top: int) -> dict:
    sys.path.insert(0, str(REPO_ROOT / "infra"))
    from s3wq_cdk.asset_files import build

    with tempfile.TemporaryDirectory(prefix="s3wq-bundle-") as tmp:
        target_dir = Path(tmp, "asset")
        build(target_dir, architecture=architecture, python_version=python_version)
        unzipped = sum(p.stat().st_size for p in target_dir.rglob("*") if p.is_file())
        archive = Path(tmp, "asset.zip")
        by_package = zip_directory(target_dir, archive)
        zipped = archive.stat().st_size
    runtime_provided = sum(v for k, v in by_package.items() if k in RUNTIME_PROVIDED)
    return {
        "architecture": architecture,
        "python_version": python_version,
        "zipped_bytes": zipped,
        "zipped_mb": round(zipped / MB, 2),
        "unzipped_mb": round(unzipped / MB, 2),
        "zipped_mb_without_runtime_provided": round((zipped - runtime_provided) / MB, 2),
        "runtime_provided_packages": list(RUNTIME_PROVIDED),
        "zipped_mb_by_package": {k: round(v / MB, 2) for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])[:top]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured imports per handler (default 5); the median is reported")
    parser.add_argument("--env", choices=["local", "lambda", "both"], default="both")
    parser.add_argument("--top", type=int, default=8, help="how many of the heaviest packages to name")
    parser.add_argument("--no-bundle", dest="bundle", action="store_false", help="skip building the bundle (it needs PyPI)")
    parser.add_argument("--architecture", choices=["arm64", "x86_64"], default="arm64")
    parser.add_argument("--python-version", default="3.14", help="Lambda's Python (default 3.14, the stack's runtime)")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    environments = ["local", "lambda"] if options.env == "both" else [options.env]
    result: dict = {"benchmark": "coldstart", **machine(), "runs": options.runs}
    result["imports"] = {name: measure_imports(options.runs, name == "lambda", options.top) for name in environments}
    if options.bundle:
        result["bundle"] = measure_bundle(options.architecture, options.python_version, options.top)
    worst = max(h["median_ms"] for env in result["imports"].values() for h in env.values())
    result["targets"] = [
        target(f"handler import, slowest median ({'/'.join(environments)})", worst, TARGET_IMPORT_MS, unit=" ms"),
        target(
            f"zipped bundle ({options.architecture}, Python {options.python_version})",
            result["bundle"]["zipped_mb"] if options.bundle else None,
            TARGET_ZIP_MB,
            unit=" MB",
        ),
    ]
    rows = [
        [env, module, h["median_ms"], h["min_ms"], h["max_ms"]]
        for env, handlers in result["imports"].items()
        for module, h in handlers.items()
    ]
    emit(result, rows, ["env", "handler", "median ms", "min ms", "max ms"])
    if options.bundle:
        b = result["bundle"]
        print(f"bundle: {b['zipped_mb']} MB zipped, {b['unzipped_mb']} MB unzipped", file=sys.stderr)
        print(f"zipped MB by package: {b['zipped_mb_by_package']}", file=sys.stderr)


if __name__ == "__main__":
    main()
