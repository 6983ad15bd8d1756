"""The construct's own errors, told in one line in whatever app uses it.

A bad setting is the deployer's to fix, and a CDK app is a process whose
output the CDK CLI shows as it is: a traceback through the construct's
internals would bury the one line that names the setting. This repository's
app.py catches :class:`DeployError` and prints it; a user's own app does not,
so the construct, when it is used (:meth:`DeploySettings.from_context`,
:class:`S3wqQueue`), installs a ``sys.excepthook`` that prints
an uncaught DeployError as ``s3wq: error: MESSAGE`` (the process still exits
non-zero, as Python ends on an uncaught exception) and hands every other
exception to the hook it found. Raised, not registered as a CDK annotation:
an annotation lets the synthesis go on building from a setting known to be
bad, and ``python app.py`` would exit 0 with an assembly that only the CDK
CLI refuses.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

PREFIX = "s3wq: error: "


class DeployError(Exception):
    """A problem of the deployment the construct finds before anything is deployed; the message names it in one line."""


class SettingsError(DeployError, ValueError):
    """A setting (a ``-c`` context key, or a DeploySettings field) is bad, or two of them do not go together."""


_ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], Any]


class _OneLineHook:
    """sys.excepthook: a DeployError as one line; anything else as the hook it replaced shows it."""

    def __init__(self, previous: _ExceptHook):
        self.previous = previous

    def __call__(self, kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
        if isinstance(value, DeployError):
            print(f"{PREFIX}{' '.join(str(value).split())}", file=sys.stderr)
        else:
            self.previous(kind, value, traceback)


def tell_in_one_line() -> None:
    """Make an uncaught DeployError print as one line (once per process; the hook in place keeps everything else)."""
    if not isinstance(sys.excepthook, _OneLineHook):
        sys.excepthook = _OneLineHook(sys.excepthook)
