"""Processors whose helpers shed every mark but their ancestry, then end their own warden or runner (``reliability.shedding_processor:<name>``).

A daemon (double fork, ``setsid``) that starts with an empty environment,
as ``env -i`` or ``Popen(env={})`` gives it, or that overwrites its
environment's memory as ``setproctitle`` does (nginx, postgres, gunicorn and
celery all do), leaves nothing in ``/proc/PID/environ`` that names its host.
Each run then makes a common mistake that ends a process of the host:

* ``os.killpg(os.getpgid(helper.pid), SIGKILL)`` on a helper it started in
  its own process group ("end the helper and whatever it started");
* ``os.kill(os.getppid(), SIGKILL)``, which ends the warden;
* a daemon that SIGSTOPs the warden and the worker, then beats on.

Helpers and marks are :mod:`escaping_processor`'s: each helper beats for
``HELPER_SECONDS`` at most and writes its pid, and only a group's first call
misbehaves; later calls beat briefly and return.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess

from .escaping_processor import _first_call, _helper_command, _Run

# A prelude for a helper that, as setproctitle does, overwrites the memory /proc/PID/environ reads.
_CLOBBER_ENVIRON = r"""
import ctypes
libc = ctypes.CDLL(None)
environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
i = 0
while environ[i]:
    ctypes.memset(environ[i], 0, len(ctypes.string_at(environ[i])))
    i += 1
"""
# A prelude for a daemon that stops the warden and the worker: pids in argv after the helper's own four.
_STOP_ANCESTORS = r"""
import os, signal
for pid in sys.argv[5:]:
    os.kill(int(pid), signal.SIGSTOP)
"""


def _parent_of(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def _daemon(command: list[str], *, env: dict[str, str] | None) -> None:
    """``command`` as a daemon: fork, setsid, fork again (the middle process exits, waited for), exec with ``env``."""
    middle = os.fork()
    if middle == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.execve(command[0], command, os.environ if env is None else env)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)


def _with_prelude(command: list[str], prelude: str) -> list[str]:
    """The helper's command with ``prelude`` run first (the script is the argument after ``-c``)."""
    at = command.index("-c") + 1
    return [*command[:at], "import sys\n" + prelude + command[at], *command[at + 1 :]]


def _shed_daemon(run: _Run, how: str, *extra_args: str, prelude: str = "") -> None:
    base = run.helper_base()
    command = [*_helper_command(base), *extra_args]
    if how == "env-i":
        _daemon(_with_prelude(command, prelude), env={})
    elif how == "title":
        _daemon(_with_prelude(command, _CLOBBER_ENVIRON + prelude), env=None)
    else:
        raise ValueError(how)
    run.started(base)


def _kill_own_helpers_group(run: _Run) -> None:
    """A helper in the run's own process group, then ``killpg`` of the helper's group: the group the run is in."""
    base = run.helper_base()
    helper = subprocess.Popen(_helper_command(base))
    run.started(base)
    run.beat(0)  # its end: what follows ends its process
    os.killpg(os.getpgid(helper.pid), signal.SIGKILL)


def env_i_daemon_then_killpg_helper(group, ctx) -> None:
    if _first_call(group, ctx):
        run = _Run(group, ctx)
        _shed_daemon(run, "env-i")
        _kill_own_helpers_group(run)


def title_daemon_then_killpg_helper(group, ctx) -> None:
    if _first_call(group, ctx):
        run = _Run(group, ctx)
        _shed_daemon(run, "title")
        _kill_own_helpers_group(run)


def env_i_daemon_then_kill_warden(group, ctx) -> None:
    if _first_call(group, ctx):
        run = _Run(group, ctx)
        _shed_daemon(run, "env-i")
        run.beat(0)
        os.kill(os.getppid(), signal.SIGKILL)


def title_daemon_then_kill_warden(group, ctx) -> None:
    if _first_call(group, ctx):
        run = _Run(group, ctx)
        _shed_daemon(run, "title")
        run.beat(0)
        os.kill(os.getppid(), signal.SIGKILL)


def daemon_stops_warden_and_worker(group, ctx) -> None:
    """An env-less daemon SIGSTOPs the warden and the worker (the reaper's parent), then beats on; the run hangs."""
    if _first_call(group, ctx):
        run = _Run(group, ctx)
        warden = os.getppid()
        worker = _parent_of(_parent_of(warden))
        _shed_daemon(run, "env-i", str(warden), str(worker), prelude=_STOP_ANCESTORS)
        run.beat(math.inf)
