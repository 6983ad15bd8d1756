"""The s3wq package's imports, read statically from its source: which s3wq module imports which, and where.

Every ``import`` and ``from ... import`` counts, at module level or inside a
function (a lazy import still ships and still binds the layers), absolute
(``s3wq.x``) or relative (``.x``, resolved against the importing module's
package). ``from s3wq.store import layout`` names the module
``s3wq.store.layout``; ``from s3wq.store import Backend`` names ``s3wq.store``.
Used by the import rules (tests/unit/test_import_rules.py) and the Lambda
asset's test (tests/infra/test_asset.py), which follows the imports of the
handlers to say what the asset must hold.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from support import REPO_ROOT

PACKAGE = "s3wq"
LAMBDAS_DIR = REPO_ROOT / "lambdas"


@dataclass(frozen=True)
class Import:
    """One import of an s3wq module: who imports it, at which line, as written."""

    importer: str
    imported: str
    line: int
    statement: str

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}: {self.statement}) imports {self.imported}"


def module_files(root: Path = LAMBDAS_DIR) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (a package by its own name, for its ``__init__.py``)."""
    files = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _base(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a ``from`` import names before its ``import``, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _targets(node: ast.AST, importer: str, is_package: bool, known: Iterable[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _base(node, importer, is_package)
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    return []


def imports_of(importer: str, path: Path, known: Iterable[str]) -> Iterator[Import]:
    """The s3wq modules that module ``importer`` (its source at ``path``) imports, anywhere in its body."""
    source = path.read_text()
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        for target in dict.fromkeys(_targets(node, importer, path.name == "__init__.py", known)):
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield Import(importer, target, node.lineno, lines[node.lineno - 1].strip())


def import_graph(root: Path = LAMBDAS_DIR) -> list[Import]:
    files = module_files(root)
    return [found for name, path in files.items() for found in imports_of(name, path, files)]


def packages_of(module: str) -> list[str]:
    """The packages whose ``__init__`` runs before ``module`` is imported: ``s3wq.a.b`` -> ``s3wq``, ``s3wq.a``."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(modules: Iterable[str], root: Path = LAMBDAS_DIR) -> set[str]:
    """Every s3wq module that importing ``modules`` can load: their imports, and their packages', transitively."""
    files = module_files(root)
    imports: dict[str, set[str]] = {}
    for found in import_graph(root):
        imports.setdefault(found.importer, set()).add(found.imported)
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(packages_of(module))
        todo.extend(imports.get(module, ()))
    missing = seen - set(files)
    assert not missing, f"imported but not a module of the package: {sorted(missing)}"
    return seen
