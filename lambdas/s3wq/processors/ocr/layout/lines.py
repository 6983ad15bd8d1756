"""Words into lines: boxes at one height chained left to right, the spaces between them read from their gaps.

Lines are built in two steps. First every word is chained to the nearest
word before it at its height, up to a gap of ``FRAGMENT_GAP_EMS``: wider
than any word gap of justified text, narrower than a column gutter, so these
fragments never cross a gutter, whatever the page's skew (a word is compared
with its neighbour only, which a 2 degree skew moves by a fraction of a
point). ``order`` then finds the gutters between fragments and, within one
column, ``merge_row`` joins the fragments of a row unless a gap of
``LINE_GAP_EMS`` parts them (a form's "Name        Date").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from s3wq.processors.ocr.layout.model import Box, Line, Word

FRAGMENT_GAP_EMS = 1.0
LINE_GAP_EMS = 3.0
# Two boxes are on one line when they overlap vertically by this share of the shorter one's height.
SAME_LINE_OVERLAP = 0.5
# A word may start this many ems before the previous one ends and still follow it (kerning, a split accent).
OVERLAP_EMS = 0.5
# A gap is a space when it is at least this share of the line's typical word gap, and at least this many ems.
# Below, the boxes are pieces of one word ("m ajor") that the source split. A line of pieces alone has no
# typical word gap of its own, and a word gap of DEFAULT_WORD_GAP_EMS is assumed.
SPACE_SHARE = 0.45
SPACE_EMS = 0.12
DEFAULT_WORD_GAP_EMS = 0.3


def em(word: Word) -> float:
    """The word's font size in points: its size, or for a source that gives none, its box's height."""
    return word.size if word.size > 0 else max(word.box.height, 1.0)


def same_line(a: Box, b: Box) -> bool:
    """Whether boxes ``a`` and ``b`` sit at one height: they overlap by half the shorter one's height."""
    shared = min(a.bottom, b.bottom) - max(a.top, b.top)
    return shared >= SAME_LINE_OVERLAP * max(min(a.height, b.height), 1e-6)


def fragments(words: Iterable[Word]) -> list[Line]:
    """The page's words chained into fragments of lines, each of words at one height with no wide gap inside.

    Words are taken left to right and each joins the open fragment at its
    height whose last word is nearest; fragments are found through buckets of
    one median word height, so a page costs O(n log n) whatever its size.
    """
    ordered = sorted((w for w in words if w.text.strip()), key=_left_to_right)
    return [make_line([ordered[i] for i in chain], ordered=True) for chain in _chains(ordered)] if ordered else []


def _chains(ordered: list[Word]) -> list[list[int]]:
    """The chains of ``ordered`` (left to right), as indexes. This loop is most of a text layer page's layout time:
    the boxes' edges are read into flat lists first, and constants are local names."""
    boxes = [w.box for w in ordered]
    lefts, rights = [b.left for b in boxes], [b.right for b in boxes]
    tops, bottoms = [b.top for b in boxes], [b.bottom for b in boxes]
    middles = [(t + b) / 2 for t, b in zip(tops, bottoms)]
    heights = [max(b - t, 1e-6) for t, b in zip(tops, bottoms)]
    bucket = max(sorted(heights)[len(heights) // 2], 1e-3)
    # An OCR word's size is its box's height, which is a short word's x-height ("on", "a"): the page's median
    # height is nearer its font's size, so that a word gap is never taken for a gutter.
    ems = [em(w) if w.confidence is None else max(em(w), bucket) for w in ordered]
    reach = FRAGMENT_GAP_EMS * max(ems)  # a chain ending further left than this before a word is closed for good
    ahead, behind, overlap = FRAGMENT_GAP_EMS, -OVERLAP_EMS, SAME_LINE_OVERLAP
    chains: list[list[int]] = []
    last: list[int] = []  # each chain's last word
    open_at: dict[int, list[int]] = {}  # bucket of a chain's last word's middle -> the chains ending there
    for i, middle in enumerate(middles):
        best, nearest, left, top, bottom, size, height = -1, float("inf"), lefts[i], tops[i], bottoms[i], ems[i], heights[i]
        # The chains whose last word can share this word's line: their middles lie within half a height of its own.
        half = (height if height > bucket else bucket) / 2
        for key in range(int((middle - half) // bucket), int((middle + half) // bucket) + 1):
            ending = open_at.get(key)
            for chain in ending or ():
                j = last[chain]
                gap, most = left - rights[j], size if size > ems[j] else ems[j]
                if behind * most <= gap <= ahead * most and abs(middles[j] - middle) < nearest:
                    if min(bottom, bottoms[j]) - max(top, tops[j]) >= overlap * min(height, heights[j]):
                        best, nearest = chain, abs(middles[j] - middle)
            if ending and left - rights[last[ending[0]]] > reach:
                ending[:] = [c for c in ending if left - rights[last[c]] <= reach]
        if best < 0:
            chains.append([i])
            last.append(i)
            best = len(chains) - 1
        else:
            old = int(middles[last[best]] // bucket)
            chains[best].append(i)
            last[best] = i
            if old == int(middle // bucket):
                continue
            open_at[old].remove(best)
        open_at.setdefault(int(middle // bucket), []).append(best)
    return chains


def _left_to_right(word: Word) -> tuple[float, float, float, str]:
    """Left edges first; the rest only makes the order one whatever order the words came in."""
    box = word.box
    return (box.left, box.top + box.bottom, box.right, word.text)


def make_line(words: Sequence[Word], *, ordered: bool = False) -> Line:
    """One line of ``words``, its text spaced from the gaps between their boxes (``ordered``: already left to right)."""
    if not ordered:
        words = sorted(words, key=_left_to_right)
    sizes = sorted([em(w) for w in words])
    size = sizes[len(sizes) // 2]
    boxes = [w.box for w in words]
    texts = [w.text.strip() for w in words]
    gaps = [b.left - a.right for a, b in pairwise(boxes)]
    word_gaps = sorted([g for g in gaps if g >= SPACE_EMS * size])
    typical = word_gaps[len(word_gaps) // 2] if word_gaps else DEFAULT_WORD_GAP_EMS * size
    space = max(SPACE_EMS * size, SPACE_SHARE * typical)
    if len(word_gaps) == len(gaps) and (not gaps or min(gaps) >= space):
        text = " ".join(texts)  # every gap a word gap: a text layer's usual line
    else:
        text = texts[0] + "".join((" " + t if gap >= space else t) for gap, t in zip(gaps, texts[1:]))
    box = Box(min([b.left for b in boxes]), min([b.top for b in boxes]), max([b.right for b in boxes]), max([b.bottom for b in boxes]))
    return Line(words=tuple(words), box=box, text=text)


def merge_row(row: Sequence[Line]) -> list[Line]:
    """Fragments of one row of a column joined into lines, left to right; a gap of LINE_GAP_EMS parts two lines."""
    ordered = sorted(row, key=lambda line: (line.box.left, line.box.top))
    groups: list[list[Line]] = []
    for line in ordered:
        if groups and line.box.left - max(f.box.right for f in groups[-1]) <= LINE_GAP_EMS * max(line.size, groups[-1][-1].size):
            groups[-1].append(line)
        else:
            groups.append([line])
    return [group[0] if len(group) == 1 else make_line([w for f in group for w in f.words]) for group in groups]
