"""A user's processor folder, shipped beside s3wq: its modules, and the ``requirements.txt`` it may hold.

``-c processor=mymod:process -c processorDir=./myproc`` names one. Its files
go to the root of the worker's asset (a zip, or a container image), where
Lambda puts its code on ``sys.path``, so ``import mymod`` works there as it
does in the folder; its requirements are installed with s3wq's own, in one
resolve, so a conflict between the two fails the build rather than the run.
Everything is checked before anything is built: a folder that is missing,
does not hold the module named, ships what it may not (the rule of
:mod:`s3wq.processors.folder`, which ``s3wq work --processor-dir`` applies
too), or has a requirement line pip would not read as a name from the index
is refused in one line.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from s3wq.errors import BadProcessorFolder
from s3wq.processors.folder import REQUIREMENTS_FILE, holds_module, import_name, requirement_names, shipped_files, top_module

from .errors import SettingsError
from .sources import REQUIREMENTS

# Refused anywhere in a requirement line, before it is parsed: options (pip takes a token that starts with "-"
# as one wherever it is: includes, editables, --hash, which would put s3wq's own unhashed pins in require-hashes
# mode, --index-url), "@" (a direct reference fetches from anywhere), and ${VAR}, which pip expands from the
# deployer's environment (a URL built from it would carry the deployer's secrets away).
_REFUSED_IN_LINE = re.compile(r"\s-|^-|[@$]")
# pip installs a requirement whose name ends like an archive as that file, from the build's working directory
# (pip's ARCHIVE_EXTENSIONS, pip/_internal/utils/filetypes.py); a PEP 508 name may end so.
_ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma")
_SPEC_MODULE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


class ProcessorSourceError(SettingsError):
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
        source.files()  # what may not ship is refused now, not at build time
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
            if not _plain_requirement(line):
                raise ProcessorSourceError(
                    f"{REQUIREMENTS_FILE}:{number}: {line!r} is not a plain requirement (a name with a version; "
                    "includes, editables, files, paths, URLs, options and ${VARIABLES} are not shipped)"
                )
            lines.append(line)
        return lines

    def files(self) -> list[Path]:
        """Every file shipped, relative to the folder, in a stable order; raise ProcessorSourceError on one that may not ship."""
        try:
            # s3wq's pins, installed beside the folder.
            return shipped_files(self.directory, s3wq_requirements=requirement_names(REQUIREMENTS))
        except BadProcessorFolder as exc:
            raise ProcessorSourceError(f"processorDir {str(self.directory)!r}: {exc}") from None

    def copy_into(self, target: Path) -> None:
        """Copy the shipped files to ``target`` (a link's content, not the link), hiding nothing ``target`` holds.

        ``target`` may hold what pip installed for the asset: a module of the
        folder's named like one pip installed (a module of the folder's own
        requirements, as built for the target's platform) would overwrite it,
        or be hidden by it.
        """
        files = self.files()
        children = target.iterdir() if target.is_dir() else ()
        held = {name for child in children if (name := import_name(child.name + ("/" if child.is_dir() else "")))}
        for relative in files:
            if (name := import_name(relative.as_posix())) in held:
                raise ProcessorSourceError(
                    f"processorDir {str(self.directory)!r}: {relative.parts[0]} would collide with {name}, which the asset "
                    "already holds (installed by pip for s3wq or the folder's requirements); rename it"
                )
        for relative in files:
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.directory / relative, destination)


def _plain_requirement(line: str) -> bool:
    """Whether pip reads ``line`` as a name to fetch from the index: PEP 508, with no URL, option, variable or file name."""
    if _REFUSED_IN_LINE.search(line):
        return False
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        return False
    return requirement.url is None and not requirement.name.lower().endswith(_ARCHIVE_SUFFIXES)
