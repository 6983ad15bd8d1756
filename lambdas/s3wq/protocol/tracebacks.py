"""A processor's exception in words: its one line, its traceback, and which frame is the user's own (the line ``s3wq failures`` shows first).

A processor that calls ``json.loads`` on bad input raises deep inside
``json/decoder.py``; the end of the traceback is all standard library, and
the line the user must fix -- theirs -- is a few frames up. The frame is
picked where the exception is caught, from the traceback's own frame
records (never by parsing the formatted text later), and stored in the
failed flag beside the traceback.

A frame is the processor's own when its file is the processor's module or
lies in the processor's package, or when it lies outside the standard
library, the installed packages and s3wq itself (a helper module of the
user's, beside the processor). The deepest such frame is the one shown.
"""

from __future__ import annotations

import functools
import os
import site
import sys
import sysconfig
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

# A failed flag stays one small object whatever a hostile or generated source holds.
MAX_FRAME_FILE_CHARS = 500
MAX_FRAME_CODE_CHARS = 500
MAX_FRAME_FUNCTION_CHARS = 200

_S3WQ_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


@dataclass(frozen=True)
class ErrorFrame:
    """Where in the processor's own code the error came from: its file (as imported), line, function and source line."""

    file: str
    line: int
    function: str
    code: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}" + (f": {self.code}" if self.code else "")


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    """The standard library, the installed packages (site-packages of the venv, the base and the user) and s3wq."""
    paths = sysconfig.get_paths()
    dirs = {paths.get(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # a virtualenv's old site.py has none
        pass
    if site.ENABLE_USER_SITE:
        dirs.add(site.getusersitepackages())
    return tuple(sorted({os.path.realpath(d) for d in dirs if d} | {_S3WQ_DIR}))


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _module_file(module_name: str | None) -> str | None:
    module = sys.modules.get(module_name or "")
    file = getattr(module, "__file__", None)
    return os.path.realpath(file) if file else None


def processor_roots(processor: Callable[..., Any]) -> tuple[str, ...]:
    """The files and folders that hold the processor's own code: its module, and its package unless that is s3wq."""
    target = processor
    while isinstance(target, functools.partial):
        target = target.func
    module_name = getattr(target, "__module__", None) or getattr(type(target), "__module__", None)
    file = _module_file(module_name)
    if file is None:
        return ()
    roots = [file]
    top = (module_name or "").split(".")[0]
    top_file = _module_file(top)
    if top != "s3wq" and top_file is not None and os.path.basename(top_file) == "__init__.py":
        roots.append(os.path.dirname(top_file))
    return tuple(roots)


def _shown_file(real: str, given: str) -> str:
    """The file as an import finds it (``mypkg/ocr.py``): relative to the sys.path entry that holds it, else as Python named it."""
    best = None
    for entry in sys.path:
        base = os.path.realpath(entry or os.curdir)
        if _within(real, base) and real != base and (best is None or len(base) > len(best)):
            best = base
    shown = os.path.relpath(real, best) if best is not None else given
    return shown[-MAX_FRAME_FILE_CHARS:]


def one_line_error(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:2000]


def processor_traceback(exc: BaseException) -> list[str]:
    """The traceback from the processor's own frame down: s3wq's frame that called it says nothing."""
    return traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)


def own_frame(exc: BaseException, roots: tuple[str, ...]) -> ErrorFrame | None:
    """The deepest frame of ``exc``'s traceback in the processor's own code (see the module's docstring), or None."""
    library = _library_dirs()
    chosen = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not frame.filename or frame.filename.startswith("<"):  # <frozen ...>, <string>: no file to open
            continue
        real = os.path.realpath(frame.filename)
        own = any(real == root or _within(real, root) for root in roots) or not any(_within(real, d) for d in library)
        if own:
            chosen = (frame, real)
    if chosen is None:
        return None
    frame, real = chosen
    return ErrorFrame(
        file=_shown_file(real, frame.filename),
        line=frame.lineno or 0,
        function=(frame.name or "?")[:MAX_FRAME_FUNCTION_CHARS],
        code=(frame.line or None) and frame.line.strip()[:MAX_FRAME_CODE_CHARS],
    )
