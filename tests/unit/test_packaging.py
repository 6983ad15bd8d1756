"""What ``pip install .`` brings is what the package imports: every third-party module outside dev/ comes from a declared dependency.

The runtime and the command line must work from a plain install (``s3wq
status --watch`` on a terminal needs rich); moto is for the local cloud
alone, in the ``local`` extra, so that neither the install nor the Lambda
asset carries it. The ``ocr`` processor's stack comes with the ``ocr`` extra,
and only processors/ocr/ imports it, and processors/vlm/, whose ``vlm``
extra holds it too (its pages are rendered and its fallback read by ocr's).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from support import REPO_ROOT

PACKAGE = REPO_ROOT / "lambdas" / "s3wq"
# The developer's tools: they may import what only the extras install.
DEV_TOOLS = PACKAGE / "dev"
OCR_PROCESSOR = PACKAGE / "processors" / "ocr"
# Import names that differ from their distribution's, for modules not installed here (the ocr extra is not, in .venv).
KNOWN_DISTRIBUTIONS = {"PIL": ["pillow"], "cv2": ["opencv-python-headless"]}


def requirement_name(requirement: str) -> str:
    """``moto[server]>=5.2.5`` -> ``moto``, normalised as PEP 503 compares names."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_imports(root: Path, *, outside: Path) -> dict[str, set[str]]:
    """Top-level module -> the files (relative to ``root``) that import it absolutely, for every module not of the stdlib nor s3wq."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(outside):
            continue
        # A script run by path (the ocr decoder) has its own folder on sys.path: its neighbours import as top-level modules.
        neighbours = {sibling.stem for sibling in path.parent.glob("*.py")}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"s3wq"} - neighbours:
                found.setdefault(top, set()).add(path.relative_to(root).as_posix())
    return found


def project_table(pyproject: Path) -> dict:
    return tomllib.loads(pyproject.read_text())["project"]


def undeclared_imports(pyproject: Path, package: Path, dev_tools: Path) -> dict[str, list[str]]:
    """Each module imported outside ``dev_tools`` that no distribution of ``[project].dependencies`` or an extra provides, with its importers."""
    project = project_table(pyproject)
    extras = [r for requirements in project.get("optional-dependencies", {}).values() for r in requirements]
    declared = {requirement_name(r) for r in [*project["dependencies"], *extras]}
    providers = {**KNOWN_DISTRIBUTIONS, **importlib.metadata.packages_distributions()}
    return {
        module: sorted(files)
        for module, files in sorted(third_party_imports(package, outside=dev_tools).items())
        # A module not installed here is taken to come from the distribution of its own name.
        if not {requirement_name(d) for d in providers.get(module, [module])} & declared
    }


def test_every_module_the_package_imports_outside_dev_comes_with_a_declared_dependency():
    assert undeclared_imports(REPO_ROOT / "pyproject.toml", PACKAGE, DEV_TOOLS) == {}


def test_the_imports_walked_include_the_ones_a_plain_install_needs():
    # The walk itself must see them, or the test above would pass on nothing.
    imports = third_party_imports(PACKAGE, outside=DEV_TOOLS)
    assert {"boto3", "botocore", "zstandard", "rich"} <= imports.keys()
    assert "cli/progress.py" in imports["rich"]
    assert "moto" not in imports  # only dev/ imports it


def test_the_ocr_stack_comes_with_the_ocr_extra_and_only_the_ocr_processor_imports_it():
    project = project_table(REPO_ROOT / "pyproject.toml")
    ocr_extra = {requirement_name(r) for r in project["optional-dependencies"]["ocr"]}
    assert {"rapidocr", "onnxruntime", "pypdfium2", "pillow"} <= ocr_extra
    assert not ocr_extra & {requirement_name(r) for r in project["dependencies"]}
    assert ocr_extra <= {requirement_name(r) for r in project["optional-dependencies"]["vlm"]}
    # dev/ may use Pillow to draw the demo's scans; the runtime outside processors/ocr/ and processors/vlm/ never needs the extra.
    outside = {
        m
        for m, files in third_party_imports(PACKAGE, outside=OCR_PROCESSOR).items()
        if any(not f.startswith(("dev/", "processors/vlm/")) for f in files)
    }
    assert not {"rapidocr", "onnxruntime", "pypdfium2", "PIL", "cv2", "numpy"} & outside
    assert {"rapidocr", "pypdfium2", "PIL"} <= third_party_imports(OCR_PROCESSOR, outside=DEV_TOOLS).keys()


def test_moto_comes_only_with_the_local_extra():
    project = project_table(REPO_ROOT / "pyproject.toml")
    assert "moto" not in {requirement_name(r) for r in project["dependencies"]}
    extras = {name: {requirement_name(r) for r in requirements} for name, requirements in project["optional-dependencies"].items()}
    assert {name for name, requirements in extras.items() if "moto" in requirements} == {"local"}
    assert any(r.startswith("moto[server]") for r in project["optional-dependencies"]["local"])


def test_the_lambda_asset_requirements_hold_neither_moto_nor_rich():
    # requirements.txt is what the Lambda asset bundles: the command line's and the local cloud's packages stay out of it.
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    pinned = {requirement_name(line) for line in lines if line.strip() and not line.lstrip().startswith(("#", "-"))}
    assert not pinned & {"moto", "rich"}
