"""No module of lambdas/s3wq or bench/ is over 400 lines and no function over 60, but those named below, each with its reason.

A unit past the limit usually holds two ideas (docs/development.md, "Style":
one file, one idea). The list is of what is still to split, not of what may
grow: an entry that is now within the limits fails too, so it is struck off
when its unit is split.
"""

from __future__ import annotations

import ast
from pathlib import Path

from module_graph import LAMBDAS_DIR, module_files

# The benchmarks are scripts side by side, each importing its helpers as top-level modules (bench/ is the
# script's own folder on sys.path); bench/.olmocr holds the olmocr the benchmarks install, not ours.
BENCH_DIR = LAMBDAS_DIR.parent / "bench"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# Module (dotted) or function (module:qualname) -> why it is still over the limit.
# Issue #20 began with twelve (the worker, the index, the claims, ...) and
# split them all; a unit that has to stay over is named here with its reason.
OVER_THE_LIMIT: dict[str, str] = {}


def bench_files() -> dict[str, Path]:
    """Every benchmark module, as ``bench.<name>``."""
    return {f"bench.{path.stem}": path for path in sorted(BENCH_DIR.glob("*.py"))}


def measured() -> dict[str, int]:
    """Lines of every module (by name) and of every function (``module:Class.method``), nested ones included."""
    return {**sizes_of(module_files(LAMBDAS_DIR)), **sizes_of(bench_files())}


def sizes_of(files: dict[str, Path]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for name, path in files.items():
        source = path.read_text()
        sizes[name] = source.count("\n")

        def visit(node: ast.AST, scope: tuple[str, ...], module: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    sizes[f"{module}:{'.'.join((*scope, child.name))}"] = child.end_lineno - child.lineno + 1
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, (*scope, child.name))
                else:
                    visit(child, scope)

        visit(ast.parse(source, filename=str(path)), ())
    return sizes


def limit_of(unit: str) -> int:
    return MAX_FUNCTION_LINES if ":" in unit else MAX_MODULE_LINES


def test_no_unit_is_over_its_limit_but_the_named_ones():
    over = {unit: lines for unit, lines in measured().items() if lines > limit_of(unit) and unit not in OVER_THE_LIMIT}
    assert not over, "over the limit (split it, or name it in OVER_THE_LIMIT with the reason it stays):\n" + "\n".join(
        f"  {unit}: {lines} lines (limit {limit_of(unit)})" for unit, lines in sorted(over.items())
    )


def test_every_named_unit_is_still_over_its_limit():
    sizes = measured()
    stale = {unit: sizes.get(unit) for unit in OVER_THE_LIMIT if sizes.get(unit, 0) <= limit_of(unit)}
    assert not stale, "within the limits now, or gone: strike them off OVER_THE_LIMIT:\n" + "\n".join(
        f"  {unit}: {'no such unit' if lines is None else f'{lines} lines'}" for unit, lines in sorted(stale.items())
    )


# s3wq_cdk (infra/s3wq_cdk, one flat package) is held to the same limits as lambdas/, with no unit named over them.
CDK_DIR = LAMBDAS_DIR.parent / "infra" / "s3wq_cdk"


def cdk_module_files() -> dict[str, Path]:
    return {"s3wq_cdk" + ("" if path.stem == "__init__" else f".{path.stem}"): path for path in sorted(CDK_DIR.glob("*.py"))}


def test_no_unit_of_s3wq_cdk_is_over_its_limit():
    assert "s3wq_cdk.orchestration" in cdk_module_files()
    over = {unit: lines for unit, lines in sizes_of(cdk_module_files()).items() if lines > limit_of(unit)}
    assert not over, "over the limit (split it):\n" + "\n".join(
        f"  {unit}: {lines} lines (limit {limit_of(unit)})" for unit, lines in sorted(over.items())
    )


def test_the_rule_reads_every_tree_it_names():
    # A folder moved or renamed would otherwise pass the rule by measuring nothing.
    sizes = measured()
    assert {"s3wq.worker.loop", "bench.scale", "bench.common"} <= set(sizes)
    assert not any(unit.startswith("bench.olmocr.") for unit in sizes)
