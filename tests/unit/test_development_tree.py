"""docs/development.md's tree of the source folders, checked both ways against lambdas/s3wq/ and infra/s3wq_cdk/.

The rule, as the page states it under the tree: every package (a folder
with an ``__init__.py``) is a line of its own, indented under its parent;
every module is named by its file name on its package's lines (the
package's line and the lines that continue it, or a line of its own under
it); an ``__init__.py`` may go unnamed. A name with a slash
(``infra/s3wq_cdk/settings.py``) is read from the folder whose lines it is
on, the checkout's root for a top-level line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from support import REPO_ROOT

ROOTS = ("lambdas/s3wq", "infra/s3wq_cdk")
DESCRIPTION_COLUMN = 24  # a line indented this far continues the entry above it
MODULE_NAME = re.compile(r"(?<![\w./-])(\w+(?:/\w+)*\.py)\b")


@dataclass(frozen=True)
class Tree:
    """Packages (``lambdas/s3wq/store``) and modules (``lambdas/s3wq/store/base.py``), relative to the checkout."""

    packages: frozenset[str]
    modules: frozenset[str]


def tree_lines(page: str) -> list[str]:
    """The lines of the first code block under "## Where things are"."""
    section = page.split("## Where things are", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def named(lines: list[str]) -> Tree:
    """What the tree names under ROOTS."""
    packages, modules = set(), set()
    folders: list[tuple[int, str]] = []  # the folder lines above this one: (indent, path)
    here = ""  # the folder whose lines these are
    for line in lines:
        description = line
        if line[:DESCRIPTION_COLUMN].strip():
            indent = len(line) - len(line.lstrip())
            name, _, description = line.strip().partition("  ")
            while folders and folders[-1][0] >= indent:
                folders.pop()
            here = folders[-1][1] if folders else ""
            path = f"{here}/{name.rstrip('/')}".lstrip("/")
            if name.endswith("/"):
                folders.append((indent, path))
                packages.add(path)
                here = path
            else:
                modules.add(path)
        modules.update(f"{here}/{name}".lstrip("/") for name in MODULE_NAME.findall(description))
    return Tree(frozenset(filter(_under_roots, packages)), frozenset(filter(_under_roots, modules)))


def existing(repo: Path) -> Tree:
    """Every package under ROOTS, and every module of them."""
    inits = [init for root in ROOTS for init in (repo / root).rglob("__init__.py")]
    packages = {init.parent for init in inits}
    modules = {path for package in packages for path in package.glob("*.py")}
    return Tree(frozenset(_relative(p, repo) for p in packages), frozenset(_relative(m, repo) for m in modules))


def differences(repo: Path) -> list[str]:
    """What docs/development.md's tree must add or strike to match the checkout at ``repo``, one line each."""
    page, found = named(tree_lines((repo / "docs" / "development.md").read_text())), existing(repo)
    unnamed_modules = {m for m in found.modules - page.modules if not m.endswith("/__init__.py")}
    return [
        *(
            f"add the package {p}/ as a line of its own, indented under {p.rpartition('/')[0]}/"
            for p in sorted(found.packages - page.packages)
        ),
        *(f"strike the package {p}/: there is no {p}/__init__.py" for p in sorted(page.packages - found.packages)),
        *(f"add the module {Path(m).name} to the lines of {Path(m).parent}/" for m in sorted(unnamed_modules)),
        *(f"strike the module {m}: there is no such file" for m in sorted(page.modules - found.modules)),
    ]


def _under_roots(path: str) -> bool:
    return any(path == root or path.startswith(f"{root}/") for root in ROOTS)


def _relative(path: Path, repo: Path) -> str:
    return path.relative_to(repo).as_posix()


def test_the_tree_names_every_package_and_module_that_exists_and_no_other() -> None:
    found = differences(REPO_ROOT)
    assert not found, 'docs/development.md, "Where things are", is out of date with the source:\n  ' + "\n  ".join(found)


def test_a_package_added_without_the_page_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "development.md").write_text(
        "## Where things are\n\n```\n"
        "lambdas/s3wq/           the library: errors.py, gone.py\n"
        "  store/                base.py\n"
        "infra/s3wq_cdk/         the construct\n"
        "```\n"
    )
    for module in ("lambdas/s3wq/__init__.py", "lambdas/s3wq/errors.py", "lambdas/s3wq/store/__init__.py",
                   "lambdas/s3wq/store/base.py", "lambdas/s3wq/fresh/__init__.py", "lambdas/s3wq/fresh/new.py",
                   "infra/s3wq_cdk/__init__.py"):  # fmt: skip
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    assert differences(tmp_path) == [
        "add the package lambdas/s3wq/fresh/ as a line of its own, indented under lambdas/s3wq/",
        "add the module new.py to the lines of lambdas/s3wq/fresh/",
        "strike the module lambdas/s3wq/gone.py: there is no such file",
    ]
