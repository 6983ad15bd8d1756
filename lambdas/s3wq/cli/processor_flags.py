"""A built-in processor's own flags on ``work``: each sets the variable the processor reads (the flag wins over it), checked first.

The processor host inherits this process's environment, so ``--ocr-lang fr`` is ``S3WQ_OCR_LANG=fr`` and
``--vlm-endpoint URL`` is ``S3WQ_VLM_ENDPOINT=URL``, checked by the processor's own validators before the workspace is
opened: a bad value is one line, exit 2, and nothing changed. The model's API key has no flag: a flag's value is in the
shell's history and in ``ps``; it is read from S3WQ_VLM_API_KEY alone.
"""

from __future__ import annotations

import argparse
import os

from s3wq.cli.arguments import processor_dir
from s3wq.config import DEFAULT_PROCESSOR
from s3wq.errors import BadInput
from s3wq.processors import BUILTIN_NAMES
from s3wq.processors.ocr.settings import ENV_LANG, ENV_MODE, BadOcrSetting, OcrMode, OcrSettings
from s3wq.processors.vlm.settings import ENV_API_KEY, ENV_ENDPOINT, ENV_IN_FLIGHT, ENV_MODEL, BadVlmSetting, VlmSettings

VLM_PROCESSORS = ("vlm", "auto")
_VLM_FLAGS = {ENV_ENDPOINT: "--vlm-endpoint", ENV_MODEL: "--vlm-model", ENV_IN_FLIGHT: "--vlm-in-flight"}
VLM_EXAMPLE = "s3wq work s3://my-bucket/run1 --processor vlm --vlm-endpoint http://gpu-box:8000/v1   # a key, if any, in S3WQ_VLM_API_KEY"


def add_processor_arguments(p: argparse.ArgumentParser) -> None:
    """``work``'s processor: a built-in or module:function, and the folder it may come from."""
    p.add_argument(
        "--processor",
        default=DEFAULT_PROCESSOR,
        help=f"built-in ({', '.join(BUILTIN_NAMES)}) or module:function (default {DEFAULT_PROCESSOR})",
    )
    p.add_argument(
        "--processor-dir",
        type=processor_dir,
        metavar="DIR",
        help="a processor folder (as `cdk deploy -c processorDir=DIR` ships it), first on the import path; "
        "its requirements.txt is not installed: this venv must hold them (pip install -r DIR/requirements.txt)",
    )


def add_ocr_arguments(p: argparse.ArgumentParser) -> None:
    """The ocr processor's routing and scripts, as S3WQ_OCR_MODE and S3WQ_OCR_LANG set them."""
    modes = "auto (default) judges a page's text layer and OCRs it where it does not read as text; force OCRs every page"
    p.add_argument("--ocr-mode", choices=[m.value for m in OcrMode], help=f"with --processor ocr: {modes}; text-layer takes any layer")
    p.add_argument(
        "--ocr-lang", metavar="LANGS", help="with --processor ocr: languages or scripts kept, e.g. en,fr or latin,greek (default en)"
    )


def add_vlm_arguments(p: argparse.ArgumentParser) -> None:
    """The vlm and auto processors' model, as S3WQ_VLM_ENDPOINT, S3WQ_VLM_MODEL and S3WQ_VLM_IN_FLIGHT set them."""
    p.add_argument(
        "--vlm-endpoint",
        metavar="URL",
        help=f"with --processor vlm or auto: the model's OpenAI-compatible endpoint, e.g. http://host:8000/v1 (or {ENV_ENDPOINT}; "
        f"an API key is read from {ENV_API_KEY} only, never a flag)",
    )
    p.add_argument("--vlm-model", metavar="NAME", help="with --processor vlm or auto: the model's name on the endpoint (default olmOCR's)")
    p.add_argument("--vlm-in-flight", metavar="N", help="with --processor vlm or auto: pages waiting on the model at once (default 16)")


def set_ocr_settings(args: argparse.Namespace) -> None:
    """``--ocr-mode`` and ``--ocr-lang`` into this process's environment; BadInput for a bad one or another processor's."""
    given = _given({ENV_MODE: args.ocr_mode, ENV_LANG: args.ocr_lang})
    if not given:
        return
    if args.processor != "ocr":
        raise BadInput(f"--ocr-mode and --ocr-lang are the ocr processor's settings; --processor is {args.processor!r}")
    try:
        OcrSettings.from_env(given)
    except BadOcrSetting as exc:
        raise BadInput(str(exc).replace(ENV_LANG, "--ocr-lang").replace(ENV_MODE, "--ocr-mode")) from None
    os.environ.update(given)


def set_vlm_settings(args: argparse.Namespace) -> None:
    """The ``--vlm-*`` flags into this process's environment, with every S3WQ_VLM_* variable checked; BadInput naming the flag.

    ``--processor vlm`` or ``auto`` without an endpoint, from the flag or the variable, is refused here: otherwise each
    group would fail on it in turn.
    """
    given = _given({ENV_ENDPOINT: args.vlm_endpoint, ENV_MODEL: args.vlm_model, ENV_IN_FLIGHT: args.vlm_in_flight})
    if args.processor not in VLM_PROCESSORS:
        if given:
            raise BadInput(
                f"{', '.join(_VLM_FLAGS[name] for name in given)}: the vlm and auto processors' settings; --processor is {args.processor!r}"
            )
        return
    environ = {**os.environ, **given}
    if not environ.get(ENV_ENDPOINT, "").strip():
        raise BadInput(
            f"--processor {args.processor} needs --vlm-endpoint URL (or {ENV_ENDPOINT}): the model's OpenAI-compatible endpoint, "
            "e.g. http://host:8000/v1"
        )
    try:
        VlmSettings.from_env(environ)
    except BadVlmSetting as exc:
        message = str(exc)
        for name in given:  # a value the flag gave is named by the flag; one from the environment, by its variable
            message = message.replace(f"{name}=", f"{_VLM_FLAGS[name]}=").replace(f"{name} ", f"{_VLM_FLAGS[name]} ")
        raise BadInput(message) from None
    os.environ.update(given)


def _given(named: dict[str, str | None]) -> dict[str, str]:
    """The flags given, by their variables' names."""
    return {name: value for name, value in named.items() if value is not None}
