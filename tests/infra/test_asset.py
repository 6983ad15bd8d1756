"""The Lambda asset holds the runtime alone: every module the handlers import, and nothing of the tools.

The asset is built as ``cdk synth`` builds it (``s3wq_cdk.asset_files.build``: pip
for Lambda's platform, so this needs the package registry, as
test_cdk_cli.py does), into a temporary directory. What it must hold is read
from the handlers' source: their s3wq imports, followed transitively, lazy
ones inside functions included (tests/module_graph.py). The tools (the
command line, the local cloud, the local S3) need rich and moto, which
Lambda has not; no handler may reach them, and none of them is shipped.
``pytest -s`` shows the asset's size.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from module_graph import LAMBDAS_DIR, PACKAGE, closure, module_files
from stack_under_test import HANDLERS

from s3wq_cdk.asset_files import NOT_SHIPPED, build
from s3wq_cdk.functions import RUNTIME
from s3wq_cdk.settings import DeploySettings

HANDLER_MODULES = sorted(handler.rsplit(".", 1)[0] for handler in HANDLERS.values())


def shipped_modules(asset: Path) -> set[str]:
    """The .py files of the package in ``asset``, relative to it (``s3wq/store/base.py``)."""
    return {path.relative_to(asset).as_posix() for path in (asset / PACKAGE).rglob("*.py")}


def is_tool(relative: str) -> bool:
    return any(relative == unshipped or relative.startswith(unshipped + "/") for unshipped in NOT_SHIPPED)


def assert_holds_the_runtime_alone(asset: Path) -> None:
    files = {name: path.relative_to(LAMBDAS_DIR).as_posix() for name, path in module_files().items()}
    needed = {files[module] for module in closure(HANDLER_MODULES)}
    shipped = shipped_modules(asset)

    assert {f"{PACKAGE}/handlers/{name}.py" for name in ("populate", "worker", "status")} <= needed
    assert not {path for path in needed if is_tool(path)}, "a handler imports a tool, which Lambda cannot import"
    missing = sorted(needed - shipped)
    assert not missing, f"imported by a handler but not in the asset: {missing}"
    tools = sorted(path for path in shipped if is_tool(path))
    assert not tools, f"tools in the asset: {tools}"
    for unshipped in NOT_SHIPPED:
        assert not (asset / unshipped).exists(), f"{unshipped} is in the asset"
    # The rest of the runtime ships whole, whether a handler imports it or not: s3wq/ less the tools.
    assert shipped == {path for path in files.values() if not is_tool(path)}


@pytest.fixture(scope="module")
def built_asset(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("lambda-asset")
    build(target, architecture=DeploySettings().architecture, python_version=RUNTIME.name.removeprefix("python"))
    return target


def size_of(asset: Path, zipped: Path) -> str:
    package = [path for path in (asset / PACKAGE).rglob("*") if path.is_file()]
    package_bytes = sum(path.stat().st_size for path in package)
    lines = sum(path.read_text().count("\n") for path in package if path.suffix == ".py")
    handlers_bytes = sum(path.stat().st_size for path in (asset / PACKAGE / "handlers").rglob("*") if path.is_file())
    total = sum(path.stat().st_size for path in asset.rglob("*") if path.is_file())
    return (
        f"Lambda asset: {PACKAGE}/ {package_bytes:,} bytes ({lines:,} lines of .py), of which handlers/ {handlers_bytes:,} bytes; "
        f"{total:,} bytes unzipped, {zipped.stat().st_size:,} bytes zipped"
    )


def test_the_built_asset_holds_every_module_the_handlers_import_and_no_tool(built_asset, tmp_path):
    assert_holds_the_runtime_alone(built_asset)
    zipped = Path(shutil.make_archive(str(tmp_path / "asset"), "zip", root_dir=built_asset))
    print(size_of(built_asset, zipped))


def test_the_unbundled_asset_of_the_tests_and_the_local_cloud_holds_the_runtime_alone(stack):
    """With bundling off (these tests, the local cloud's deploy) the asset is ``lambdas/`` as it is, less the tools."""
    outdir = Path(stack.stack.node.root.outdir)
    (asset,) = [path for path in outdir.glob("asset.*") if (path / PACKAGE).is_dir()]
    assert_holds_the_runtime_alone(asset)
