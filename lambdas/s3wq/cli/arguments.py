"""The types of the command line's arguments: each refuses a bad value with one line saying what it must be."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from s3wq.errors import ConfigError
from s3wq.inputs import InputLocation, parse_locations


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r:.40}") from None


def _finite_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r:.40}") from None
    if not math.isfinite(value):
        # inf would run forever and nan compares false with everything: neither is a setting.
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r:.40}")
    return value


def positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    value = _finite_number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    value = _finite_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return value


def port(text: str) -> int:
    value = _whole_number(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 1 to 65535, got {value}")
    return value


def locations(text: str) -> tuple[InputLocation, ...]:
    try:
        parsed = parse_locations(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if not parsed:
        raise argparse.ArgumentTypeError("name at least one s3://bucket or s3://bucket/prefix")
    return parsed


def processor_dir(text: str) -> Path:
    """A folder of processor modules, to go first on the import path (absolute: the processor host inherits it)."""
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r:.80} is not a folder")
    return folder.resolve()  # what it holds is checked by the command (s3wq.processors.folder), in one line
