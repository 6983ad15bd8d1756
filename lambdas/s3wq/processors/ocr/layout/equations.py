"""Equations: lines of mathematics that plain text cannot carry, flagged for a model to read."""

from __future__ import annotations

from s3wq.processors.ocr.layout.model import Line


def is_equation(line: Line) -> bool:
    """Whether ``line`` is set mathematics rather than prose. (Placeholder: never yet.)"""
    return False
