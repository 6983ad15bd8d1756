"""How bench/ocr.py scores a page: OCR boxes put in reading order, and the edit distance of characters and words to the known text.

numpy is imported inside ``reading_order``: only .venv-ocr has it.
"""

from __future__ import annotations

import statistics
from typing import Any


def levenshtein(a: Any, b: Any) -> int:
    """Edit distance between two sequences (characters of a string, or words of a list)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, item in enumerate(a, start=1):
        current = [i]
        for j, other in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (item != other)))
        previous = current
    return previous[-1]


def reading_order(boxes: Any, texts: Any) -> list[str]:
    """OCR boxes as printed lines: grouped top to bottom by centre, then each line left to right."""
    import numpy as np

    if boxes is None or texts is None:
        return []
    items = sorted(
        ((float(np.mean(box[:, 1])), float(np.min(box[:, 0])), float(np.ptp(box[:, 1])), text) for box, text in zip(boxes, texts)),
    )
    lines: list[list[tuple[float, float, float, str]]] = []
    for item in items:
        if lines and abs(item[0] - statistics.fmean(i[0] for i in lines[-1])) < item[2] / 2:
            lines[-1].append(item)
        else:
            lines.append([item])
    return [" ".join(i[3] for i in sorted(line, key=lambda i: i[1])) for line in lines]


def folded(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())
