"""The layers of lambdas/s3wq import downwards only, checked on the source; a break names its module and line.

The layers, bottom up (docs/development.md draws the tree):

    store/                      the storage contract and its backends
    protocol/                   lock bodies, claims, leases, the clock
    index/                      the index and its catalog
    host/, processors/          the processor host; the processor contract and the built-ins
    worker/                     the worker loop
    ops/                        status, inspection, repairs
    handlers/                   the Lambda handlers
    cli/, dev/, __main__.py     the tools: not in the Lambda asset

Top-level modules (errors, config, model, wording, inputs) are shared by
every layer. The package's ``__init__`` is its public face and imports the
runtime; inside the runtime only the handlers lean on it. Every import
counts, a lazy one inside a function too (tests/module_graph.py reads them).
"""

from __future__ import annotations

import ast
import functools
import shutil
from pathlib import Path

import pytest
from module_graph import LAMBDAS_DIR, PACKAGE, import_graph

RUNTIME_LAYERS = ("store", "protocol", "index", "host", "processors", "worker", "ops", "handlers")
TOOLS = ("cli", "dev")
TOP = "top-level"  # errors, config, model, wording, inputs
FACADE = "the package's __init__"

# Which layers each layer may import, besides its own and the top-level modules.
_BELOW_WORKER = {"store", "protocol", "index", "host", "processors"}
MAY_IMPORT = {
    "store": set(),
    "protocol": {"store"},
    "index": {"store", "protocol"},
    "host": {"store", "protocol", "index", "processors"},  # the host runs processors
    "processors": {"store", "protocol", "index"},
    "worker": _BELOW_WORKER,
    "ops": _BELOW_WORKER | {"worker"},
    "handlers": set(RUNTIME_LAYERS) | {FACADE},
    "cli": set(RUNTIME_LAYERS) | {FACADE, "dev"},  # `s3wq local` starts the local cloud, imported when it runs
    "dev": set(RUNTIME_LAYERS) | {FACADE},
    TOP: {"store"},  # inputs and config read keys and S3 URIs
    FACADE: set(RUNTIME_LAYERS),
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == PACKAGE:
        return FACADE
    if module == f"{PACKAGE}.__main__":
        return "cli"  # `python -m s3wq` is the command line
    if parts[1] in RUNTIME_LAYERS or parts[1] in TOOLS:
        return parts[1]
    return TOP


def problems(root: Path = LAMBDAS_DIR) -> list[str]:
    """Every import of the tree under ``root`` that breaks a rule, as ``rule: where``."""
    found = []
    for imp in import_graph(root):
        importer, imported = layer_of(imp.importer), layer_of(imp.imported)
        if importer == imported:
            continue
        if importer in ("protocol", "store") and imported in ("worker", "cli", "dev", "ops"):
            found.append(f"the correctness core (protocol/, store/) imports worker/, cli/, dev/ or ops/: {imp}")
        elif importer not in TOOLS and imported in TOOLS:
            found.append(f"the runtime imports a tool (cli/, dev/; not in the Lambda asset): {imp}")
        elif imported != TOP and imported not in MAY_IMPORT[importer]:
            allowed = "".join(f"{layer}, " for layer in sorted(MAY_IMPORT[importer]))
            found.append(f"{importer} may import only {allowed}its own and top-level modules: {imp}")
    return found


def test_every_import_goes_down_the_layers():
    found = problems()
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_the_graph_reads_the_imports_of_every_layer():
    """A check that saw no imports would pass on anything."""
    importers = {layer_of(imp.importer) for imp in import_graph()}
    assert importers >= {*RUNTIME_LAYERS, *TOOLS} - {"store"}, importers


# --- the rules catch a break: on a copy of the tree, never the tree itself ---------------------------


def broken_copy(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of lambdas/s3wq in which ``module`` (a path under s3wq/) ends with a function that runs ``line``."""
    root = tmp_path / "lambdas"
    shutil.copytree(LAMBDAS_DIR / PACKAGE, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / PACKAGE / module
    path.write_text(path.read_text() + f"\n\ndef _deliberately_broken():\n    {line}\n")
    ast.parse(path.read_text())
    return root


BREAKS = {
    "protocol imports worker, inside a function": ("protocol/clock.py", "from s3wq.worker import Worker", "correctness core"),
    "store imports ops, relatively": ("store/layout.py", "from ..ops import status", "correctness core"),
    "store imports protocol": ("store/base.py", "import s3wq.protocol.clock", "store may import only"),
    "protocol imports dev": ("protocol/lease.py", "from s3wq.dev import local_s3", "correctness core"),
    "the runtime imports the cli": ("handlers/worker.py", "from s3wq import cli", "the runtime imports a tool"),
    "a top-level module imports dev": ("errors.py", "from .dev.local_s3 import LocalS3", "the runtime imports a tool"),
    "ops imports a handler": ("ops/status.py", "from s3wq.handlers import runtime", "ops may import only"),
    "dev imports the cli": ("dev/localcloud/demo.py", "from s3wq.cli import progress", "dev may import only"),
}


@functools.cache
def problems_of_the_tree() -> tuple[str, ...]:
    return tuple(problems())


def test_a_copy_of_the_tree_has_the_problems_of_the_tree(tmp_path):
    assert tuple(problems(broken_copy(tmp_path, "wording.py", "pass"))) == problems_of_the_tree()


@pytest.mark.parametrize("module, line, rule", list(BREAKS.values()), ids=list(BREAKS))
def test_a_broken_import_is_named_with_its_module_and_line(tmp_path, module, line, rule):
    found = problems(broken_copy(tmp_path, module, line))

    new = [problem for problem in found if problem not in problems_of_the_tree()]
    importer = f"{PACKAGE}." + module.removesuffix(".py").replace("/", ".")
    assert len(new) == 1, found
    assert rule in new[0] and importer in new[0] and line in new[0], new[0]
