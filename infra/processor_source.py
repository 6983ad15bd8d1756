"""A user's processor folder, shipped beside s3wq: its modules, and the ``requirements.txt`` it may hold.

``-c processor=mymod:process -c processorDir=./myproc`` names one. Its files
go to the root of the worker's asset (a zip, or a container image), where
Lambda puts its code on ``sys.path``, so ``import mymod`` works there as it
does in the folder; its requirements are installed with s3wq's own, in one
resolve, so a conflict between the two fails the build rather than the run.
Everything is checked before anything is built: a folder that is missing,
does not hold the module named, would shadow s3wq, or links outside itself
is refused in one line.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from s3wq.processors.folder import holds_module, shadowing_name, top_module

REQUIREMENTS_FILE = "requirements.txt"
# Caches, version control and environments a project folder often holds; Lambda runs none of them.
# Hidden files and folders (a name starting with "."), such as .env, .aws/ or .ssh/, are never shipped either:
# what is in the code is readable by anyone allowed lambda:GetFunction.
SKIPPED_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", "cdk.out"}
)
SKIPPED_SUFFIXES = (".pyc", ".pyo")
# A requirement line pip reads on its own: a project name (PEP 508) with any
# version, extras and markers after it. Refused: includes (-r, -c),
# editables and paths, which point at files the build cannot see; direct
# references (name @ URL), which fetch from anywhere; options such as --hash,
# which would put s3wq's own unhashed pins in require-hashes mode; and ${VAR},
# which pip expands from the deployer's environment (a URL built from it
# would carry the deployer's secrets away).
_REQUIREMENT_RE = re.compile(r"^(?!.*\s-)[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._, -]*\])?\s*([<>=!~;][^@$]*)?$")
_SPEC_MODULE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class ProcessorSourceError(ValueError):
    """The processor folder cannot be shipped as it is; the message names the problem in one line."""


@dataclass(frozen=True)
class ProcessorSource:
    """A checked processor folder: ``directory`` (absolute) holds the top-level module of ``spec``."""

    directory: Path
    spec: str

    @classmethod
    def open(cls, directory: str | Path, *, spec: str) -> ProcessorSource:
        """Check ``directory`` for ``spec`` (``module:function``) and return it; raise ProcessorSourceError naming the problem."""
        folder = Path(directory).expanduser().resolve()
        if not folder.is_dir():
            raise ProcessorSourceError(f"processorDir {str(directory)!r} is not a folder")
        if not _SPEC_MODULE_RE.match(spec or ""):
            raise ProcessorSourceError(f"processor {spec!r} must be module:function when processorDir is set")
        if not holds_module(folder, spec):
            top = top_module(spec)
            raise ProcessorSourceError(
                f"processorDir {str(directory)!r} holds no module {top!r} ({top}.py or {top}/) for processor {spec!r}"
            )
        source = cls(folder, spec)
        if shadow := shadowing_name(folder):
            raise ProcessorSourceError(f"processorDir {str(directory)!r} holds {shadow!r}, which would shadow s3wq's own package")
        source.files()  # links that leave the folder are refused now, not at build time
        source.requirement_lines()
        return source

    @property
    def requirements(self) -> Path | None:
        path = self.directory / REQUIREMENTS_FILE
        return path if path.is_file() else None

    def requirement_lines(self) -> list[str]:
        """The requirements, comments and blank lines dropped; raise ProcessorSourceError on a line pip could not read alone."""
        if self.requirements is None:
            return []
        lines = []
        for number, raw in enumerate(self.requirements.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
            if not line:
                continue
            if not _REQUIREMENT_RE.match(line):
                raise ProcessorSourceError(
                    f"{REQUIREMENTS_FILE}:{number}: {line!r} is not a plain requirement (a name with a version; "
                    "includes, editables, paths, URLs, options and ${VARIABLES} are not shipped)"
                )
            lines.append(line)
        return lines

    def files(self) -> list[Path]:
        """Every file shipped, relative to the folder, in a stable order; caches and environments are left out (and not walked)."""
        shipped = []
        for root, dirs, names in os.walk(self.directory):
            here = Path(root)
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES and not d.startswith("."))
            names = [n for n in names if not n.startswith(".") and not n.endswith(SKIPPED_SUFFIXES)]
            for name in [*dirs, *names]:
                path = here / name
                relative = path.relative_to(self.directory).as_posix()
                if path.is_symlink() and not path.resolve().is_relative_to(self.directory):
                    raise ProcessorSourceError(f"processorDir: {relative} links outside the folder (to {path.resolve()})")
                if path.is_symlink() and path.is_dir():
                    # os.walk does not enter it, so its modules would be missing on Lambda while importable here.
                    raise ProcessorSourceError(f"processorDir: {relative} links to a folder; ship the folder itself, not a link to it")
            shipped.extend((here / name).relative_to(self.directory) for name in names)
        return sorted(path for path in shipped if (self.directory / path).is_file())

    def copy_into(self, target: Path) -> None:
        """Copy the shipped files to ``target`` (a link's content, not the link)."""
        for relative in self.files():
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.directory / relative, destination)
