"""How a processor is named: a built-in name or ``module:function``, loaded with errors that name the file and line."""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback

from s3wq.errors import ProcessorNotFound
from s3wq.processors.builtins import noop, text
from s3wq.processors.context import Processor
from s3wq.processors.profiles import PROCESSOR_PROFILES

BUILTIN_PROCESSORS: dict[str, Processor] = {"noop": noop, "text": text}
# Built in, but needing an extra (name -> the extra): imported only when named, so that a plain install stays light.
# Every such processor has a profile (profiles.py), so the profiles are the one list of them.
EXTRA_PROCESSORS: dict[str, str] = {name: profile.extra for name, profile in PROCESSOR_PROFILES.items()}
_EXTRA_MODULES = {name: profile.module or f"s3wq.processors.{name}.processor" for name, profile in PROCESSOR_PROFILES.items()}
BUILTIN_NAMES = tuple(sorted({*BUILTIN_PROCESSORS, *EXTRA_PROCESSORS}))
_SPEC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")


def load_processor(spec: str) -> Processor:
    """A built-in name or ``module:function``; raise ProcessorNotFound naming the problem in one line.

    A module that fails to import (a syntax error, an import of its own that
    is missing, an exception at import) is named by file and line, the way a
    compiler would, not by a traceback through importlib.
    """
    if spec in BUILTIN_PROCESSORS:
        return BUILTIN_PROCESSORS[spec]
    if spec in EXTRA_PROCESSORS:
        return _load_with_extra(spec, EXTRA_PROCESSORS[spec])
    if not _SPEC_RE.match(spec or ""):
        names = ", ".join(BUILTIN_NAMES)
        raise ProcessorNotFound(f"processor {spec!r} is neither built in ({names}) nor module:function")
    module_name, function_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0] and module_name.startswith(exc.name):
            raise ProcessorNotFound(
                f"processor module {module_name!r} not found (looked in the current directory and on sys.path; "
                f"run from the folder that holds it, or add that folder to PYTHONPATH)"
            ) from None
        raise ProcessorNotFound(f"processor module {module_name!r} cannot be imported: {_where(exc)}{exc}") from None
    except SyntaxError as exc:
        raise ProcessorNotFound(f"{exc.filename}:{exc.lineno}: {type(exc).__name__}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 -- anything the module raises as it is imported is the user's to fix
        raise ProcessorNotFound(f"processor module {module_name!r} failed to import: {_where(exc)}{type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ProcessorNotFound(f"processor {spec!r}: {module_name} has no function {function_name!r}")
    return function


def _load_with_extra(name: str, extra: str) -> Processor:
    """The built-in ``name`` from ``s3wq.processors.<name>``, prepared; ProcessorNotFound in one line when its extra is missing."""
    # Before numpy and onnxruntime load (they read it once): one page is one core's work, and a
    # machine's cores are used by more workers (s3wq work -j), which must not oversubscribe them.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        module = importlib.import_module(_EXTRA_MODULES[name])
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "s3wq":
            raise  # s3wq's own module missing is a broken install, not a missing extra
        raise ProcessorNotFound(f"the {name} processor needs its extra: pip install 's3wq[{extra}]'") from None
    except ImportError as exc:  # installed, but a compiled part will not load (a wheel for another platform)
        raise ProcessorNotFound(f"the {name} processor's extra is installed but cannot be imported: {exc}") from None
    module.prepare(name)  # a bad setting or a model that would be downloaded fails here, before any group
    return getattr(module, name)


def _where(exc: BaseException) -> str:
    """``file:line: `` of the innermost frame of the user's code that raised, or nothing."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""


def importable_from_current_directory() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does.

    A console script starts with its own bin directory there instead, so
    ``--processor myproc:fn`` run beside ``myproc.py`` would not be found.
    The processor host inherits this through PYTHONPATH.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
