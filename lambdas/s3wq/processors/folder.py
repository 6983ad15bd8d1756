"""What a processor folder must hold, and may not: one rule for ``s3wq work --processor-dir`` and ``cdk deploy -c processorDir``.

The folder goes first on the import path (``work``) or to the root of the
worker's asset (Lambda, beside what pip installed), so it must hold the
top-level module that ``module:function`` names, and its files may not
replace what s3wq runs on: a module of the standard library, s3wq itself, a
distribution s3wq needs, or Python's start-up hooks. What ships is the
folder's plain files: caches, environments and hidden files stay out, and a
link or a hard link may not bring in a file that would not ship by itself.
:func:`shipped_files` applies the rule; the command line and infra/ call it.
"""

from __future__ import annotations

import csv
import functools
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from s3wq.errors import BadProcessorFolder

REQUIREMENTS_FILE = "requirements.txt"
# Caches, version control and environments a project folder often holds; Lambda runs none of them.
# Hidden files and folders (a name starting with "."), such as .env, .aws/ or .ssh/, are never shipped either:
# what is in the code is readable by anyone allowed lambda:GetFunction.
SKIPPED_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", "cdk.out"}
)
SKIPPED_SUFFIXES = (".pyc", ".pyo")
# Run by every interpreter that starts with them on its path: the site module imports sitecustomize and
# usercustomize, and runs the import lines of a site directory's .pth files. Under `s3wq work` the folder is
# on the processor host's PYTHONPATH, and a folder copied into a site directory would have its .pth files read,
# so none ships, wherever it is in the folder.
STARTUP_HOOKS = ("sitecustomize", "usercustomize")
_EXTENSION_SUFFIXES = (".so", ".pyd")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_STDLIB = "the standard library's {name}"


def top_module(spec: str) -> str:
    """``pkg`` of ``pkg.mod:fn``."""
    return spec.split(":", 1)[0].split(".", 1)[0]


def holds_module(folder: Path, spec: str) -> bool:
    """Whether ``folder`` holds the top-level module of ``spec``, as ``top.py`` or a ``top/`` package."""
    top = top_module(spec)
    return (folder / f"{top}.py").is_file() or (folder / top).is_dir()


def _skipped(relative: Path) -> bool:
    """Whether a path of the folder stays out of what ships: under a cache, an environment or a hidden name, or compiled."""
    return any(part in SKIPPED_NAMES or part.startswith(".") for part in relative.parts) or relative.name.endswith(SKIPPED_SUFFIXES)


def shipped_files(folder: Path, *, s3wq_requirements: Iterable[str] = ()) -> list[Path]:
    """Every file that ships, relative to ``folder`` (absolute), in a stable order; raise BadProcessorFolder naming the first problem.

    ``s3wq_requirements``: distributions the asset installs beside s3wq's own
    (its pinned requirements.txt), whose modules the folder may not shadow either.
    """
    shipped = _walk(folder)
    _refuse_startup_hooks(shipped)
    _refuse_outside_hard_links(folder, shipped)
    _refuse_shadows(folder, shipped, [*s3wq_requirements])
    return shipped


def _walk(folder: Path) -> list[Path]:
    """The files that ship, caches and environments left out (and not walked); raise on a link to a folder or to what does not ship."""
    shipped: list[Path] = []
    for root, dirs, names in os.walk(folder):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not _skipped(Path(d)))
        names = [n for n in names if not _skipped(Path(n))]
        for name in [*dirs, *names]:
            if (here / name).is_symlink():
                _check_link(folder, here / name)
        shipped.extend((here / name).relative_to(folder) for name in names if (here / name).is_file())
    return sorted(shipped)


def _check_link(folder: Path, path: Path) -> None:
    relative = path.relative_to(folder).as_posix()
    target = path.resolve()
    if not target.is_relative_to(folder):
        raise BadProcessorFolder(f"{relative} links outside the folder (to {target})")
    if _skipped(target.relative_to(folder)):
        # settings.txt -> .env would ship the hidden file's content under a name that is not hidden.
        inside = target.relative_to(folder).as_posix()
        raise BadProcessorFolder(f"{relative} links to {inside}, which does not ship (hidden, a cache or an environment)")
    if path.is_dir():
        # os.walk does not enter it, so its modules would be missing on Lambda while importable here.
        raise BadProcessorFolder(f"{relative} links to a folder; ship the folder itself, not a link to it")


def _refuse_startup_hooks(shipped: list[Path]) -> None:
    for relative in shipped:
        if relative.suffix == ".pth" or (relative.suffix == ".py" and relative.stem in STARTUP_HOOKS):
            raise BadProcessorFolder(
                f"{relative.as_posix()} is a start-up hook Python runs from the import path "
                "(sitecustomize.py, usercustomize.py, *.pth); it is not shipped"
            )


def _refuse_outside_hard_links(folder: Path, shipped: list[Path]) -> None:
    # A hard link is one file under two names, and nothing says where the other name is. So every name of a
    # shipped file must be one that ships: counted per inode over the shipped names, a file with more links
    # than that has a name elsewhere (outside the folder, or hidden in it like .env) whose content would ship.
    regular = [relative for relative in shipped if not (folder / relative).is_symlink()]  # a link is no name of its target
    stats = {relative: (folder / relative).stat() for relative in regular}
    names = Counter((stat.st_dev, stat.st_ino) for stat in stats.values())
    for relative, stat in stats.items():
        if stat.st_nlink > (shipped_names := names[stat.st_dev, stat.st_ino]):
            raise BadProcessorFolder(
                f"{relative.as_posix()} is hard-linked to a name outside the folder or hidden in it "
                f"({stat.st_nlink} links, {shipped_names} shipped); ship a copy of it"
            )


def _top_level_entries(shipped: list[Path]) -> dict[str, str]:
    """``{import name: entry}`` of what the folder puts at the top of the import path: ``x.py``, ``x/`` and extension modules."""
    entries: dict[str, str] = {}
    for relative in shipped:
        if name := import_name(relative.as_posix()):
            entries.setdefault(name, f"{name}/" if len(relative.parts) > 1 else relative.name)
    return entries


def _refuse_shadows(folder: Path, shipped: list[Path], s3wq_requirements: list[str]) -> None:
    owners = protected_modules((*s3wq_requirements,), (*requirement_names(folder / REQUIREMENTS_FILE),))
    for name, entry in _top_level_entries(shipped).items():
        if name not in owners:
            continue
        if owners[name] == _STDLIB.format(name=name) and entry.endswith("/") and not (folder / name / "__init__.py").is_file():
            # A folder that is no package (templates/, html/) never hides a module: import prefers a regular one.
            # At the asset's root it would merge into an installed package's folder, so for those any folder counts.
            continue
        raise BadProcessorFolder(f"{entry} would shadow {owners[name]}; rename it")


def requirement_names(path: Path) -> list[str]:
    """The distribution names of a requirements file, each line's leading name (infra/ checks the lines themselves); [] without it."""
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [match.group() for line in lines if not line.startswith("#") and (match := _NAME_RE.match(line))]


@functools.cache
def protected_modules(s3wq_requirements: tuple[str, ...] = (), folder_requirements: tuple[str, ...] = ()) -> dict[str, str]:
    """``{top-level import name: whose it is}`` for every name a processor folder may not ship at its top.

    The distributions s3wq needs are read from what is installed, not from a
    list kept by hand: s3wq's own requirements (its metadata) and
    ``s3wq_requirements``, followed through each installed distribution's
    requirements. Their import names are the distribution's top_level.txt,
    else the first parts of its RECORD. The folder's own requirements are
    installed at the same root, so their modules collide too.
    """
    owners = {name: _STDLIB.format(name=name) for name in sys.stdlib_module_names}
    owners.update({name: f"Python's start-up hook {name}" for name in STARTUP_HOOKS})
    for roots, whose in (
        (folder_requirements, "a requirement of the folder"),
        ((*_s3wq_requires(), *s3wq_requirements), "which s3wq needs"),
    ):
        for distribution, modules in _closure(roots).items():
            owners.update({module: f"{_named(module, distribution)}, {whose}" for module in modules})
    owners["s3wq"] = "s3wq's own package"
    return owners


def _named(module: str, distribution: str) -> str:
    return module if module == distribution.replace("-", "_") else f"{module} of {distribution}"


def _s3wq_requires() -> list[str]:
    try:
        return metadata.requires("s3wq") or []
    except metadata.PackageNotFoundError:  # run from a checkout's lambdas/ without an install: its requirements.txt is passed in
        return []


def _closure(requirements: Iterable[str]) -> dict[str, frozenset[str]]:
    """``{distribution: its top-level modules}`` of ``requirements`` and everything they require, transitively, as installed here."""
    found: dict[str, frozenset[str]] = {}
    pending = [*requirements]
    while pending:
        requirement = pending.pop()
        match = _NAME_RE.match(requirement)
        if match is None or re.search(r"\bextra\s*==", requirement):  # an extra's: not installed with the distribution
            continue
        name = re.sub(r"[-_.]+", "-", match.group()).lower()
        if name in found:
            continue
        installed = _installed(name)
        # Not installed here (a requirement of the folder, before its build): its import name is most often its own.
        found[name] = installed[0] if installed else frozenset({name.replace("-", "_")})
        pending.extend(installed[1] if installed else ())
    return found


@functools.cache
def _installed(name: str) -> tuple[frozenset[str], tuple[str, ...]] | None:
    """(top-level import names, requirements) of an installed distribution, or None."""
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    # top_level.txt where the build wrote one (setuptools), else the first part of each path its RECORD lists.
    declared = (distribution.read_text("top_level.txt") or "").split()
    recorded = () if declared else (row[0] for row in csv.reader((distribution.read_text("RECORD") or "").splitlines()) if row)
    names = {*declared, *(import_name(path) for path in recorded)}
    return frozenset(name for name in names if name and name.isidentifier()), tuple(distribution.requires or ())


def import_name(path: str) -> str | None:
    """The top-level import name that a file or folder at ``path`` (``/``-separated, from an import root) belongs to, if any."""
    parts = path.split("/")
    if parts[0] in ("..", "__pycache__") or parts[0].endswith((".dist-info", ".data", ".egg-info")):
        return None
    if len(parts) > 1:
        return parts[0]
    return parts[0].split(".", 1)[0] if parts[0].endswith((".py", *_EXTENSION_SUFFIXES)) else None
