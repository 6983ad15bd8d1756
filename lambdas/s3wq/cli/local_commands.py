"""``local demo`` and ``local up``: the deployed app on an embedded local cloud, which needs the ``s3wq[local]`` extra."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from s3wq.cli.execution import follow_showing_progress
from s3wq.cli.processor_flags import VLM_PROCESSORS
from s3wq.errors import BadInput, MissingExtra
from s3wq.processors import importable_from_current_directory, load_processor
from s3wq.processors.vlm.settings import ENV_ENDPOINT, BadVlmSetting, endpoint_of

# The local cloud's server runs moto's server app, which needs moto and what
# moto's own [server] extra brings (Flask); ``pip install 's3wq[local]'`` installs both.
LOCAL_CLOUD_MODULES = ("moto", "flask")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a finder that refuses it: not importable either
        return False


def require_local_extra() -> None:
    """MissingExtra (exit 2) before anything is started or created, when the local cloud could not run here."""
    if not all(_installed(module) for module in LOCAL_CLOUD_MODULES):
        raise MissingExtra("the local cloud", "moto[server]", extra="local")


def cmd_local_demo(args: argparse.Namespace) -> int:
    require_local_extra()
    # The one use of dev/ from the command line: the local cloud is a developer's tool, installed with the extra.
    from s3wq.dev.localcloud.demo import run_demo

    where = _processor(args)
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout, flush=True)  # --json: stdout is the summary's
    with _model_endpoint(args, say) as vlm_endpoint:
        return run_demo(
            workers=args.workers,
            inputs=args.inputs,
            group_size=args.group_size,
            processor=args.processor,
            as_json=args.json,
            **where,
            **_kept_logs(args.keep_logs),
            # The demo is followed with the progress display: the local cloud (dev/) imports nothing of the command line.
            follow=functools.partial(follow_showing_progress, show=not args.json),
            vlm_endpoint=vlm_endpoint,
        )


def _model_endpoint(args: argparse.Namespace, say: Callable[[str], None]) -> AbstractContextManager[str | None]:
    """The model's endpoint for ``--processor vlm|auto``: ``--vlm-endpoint``, checked, or a stand-in's; else None."""
    from s3wq.dev.localcloud.vlm import model_endpoint

    if args.processor not in VLM_PROCESSORS:
        if args.vlm_endpoint is not None:
            raise BadInput(f"--vlm-endpoint is the vlm and auto processors' setting; --processor is {args.processor!r}")
        return contextlib.nullcontext(None)
    endpoint = None
    if args.vlm_endpoint is not None:
        try:
            endpoint = endpoint_of(args.vlm_endpoint)
        except BadVlmSetting as exc:
            raise BadInput(str(exc).replace(f"{ENV_ENDPOINT}=", "--vlm-endpoint=").replace(f"{ENV_ENDPOINT} ", "--vlm-endpoint ")) from None
    return model_endpoint(endpoint, say=say)


def _processor(args: argparse.Namespace) -> dict[str, Any]:
    """Where the functions find the processor: its asset (a checked ``--processor-dir``, or a built-in's extra), or the current directory.

    A built-in that needs an extra (``--processor ocr``) runs from the asset
    its worker image would carry, so this venv needs no extra.

    Checked before anything starts, so a typo fails here, not inside a
    Lambda. A folder's module or an extra's is not imported here: its
    requirements are in its asset, not in this venv.
    """
    from s3wq.dev.localcloud.asset import BuiltinExtra, ProcessorFolder

    if args.processor_dir is not None:
        return {"asset_source": ProcessorFolder.check(args.processor_dir, args.processor)}
    extra = BuiltinExtra.find(args.processor)
    if extra is not None:
        return {"asset_source": extra}
    path = _processor_path()
    load_processor(args.processor)
    return {"extra_pythonpath": path}


def _kept_logs(keep_logs: str | None) -> dict[str, Any]:
    """``--keep-logs``: absent, the logs go with the local cloud; without DIR, they are kept in a new folder of the temp directory."""
    from pathlib import Path

    if keep_logs is None:
        return {"keep_logs": False, "log_dir": None}
    if not keep_logs:
        return {"keep_logs": True, "log_dir": None}
    folder = Path(os.path.abspath(keep_logs))  # printed when it stops: absolute, without ".."
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise BadInput(f"--keep-logs {keep_logs}: is a file, not a folder") from None
    except OSError as exc:
        raise BadInput(f"--keep-logs {keep_logs}: cannot create the folder ({exc.strerror})") from None
    return {"keep_logs": True, "log_dir": folder}


def _processor_path() -> tuple[str, ...]:
    """The current directory, importable here and by the local cloud's Lambdas, as ``python -m`` makes it."""
    importable_from_current_directory()
    return (os.getcwd(),)


def cmd_local_up(args: argparse.Namespace) -> int:
    require_local_extra()
    from s3wq.dev.localcloud.demo import run_up

    where = _processor(args)
    with _model_endpoint(args, functools.partial(print, flush=True)) as vlm_endpoint:
        return run_up(
            port=args.port,
            workers=args.workers,
            group_size=args.group_size,
            processor=args.processor,
            **where,
            **_kept_logs(args.keep_logs),
            vlm_endpoint=vlm_endpoint,
        )
