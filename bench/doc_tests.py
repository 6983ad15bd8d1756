"""The corpus's unit tests, made from what each document's pages hold, in the four kinds document-OCR benchmarks use.

* ``present``: a passage of the body (a heading, ten words of a paragraph, a
  list item, the sidebar) is in the output, within one edit in twenty
  characters (doc_matching.py), case-sensitive;
* ``absent``: a running header, page footer or "Downloaded from" banner is
  not in the body, case-insensitive (as olmOCR-bench does);
* ``order``: the last words of a body block come before the first words of
  the next one in reading order (down a column, then the next column; the
  title first);
* ``table``: the cell reading A has B at its right, under it, at the head of
  its column or at the start of its row, in a Markdown or HTML table.

Passages are drawn with a seeded ``random.Random``, so one corpus has one set.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum

from doc_layout import Fragment, FragmentKind
from doc_matching import found, in_order
from doc_tables import Relation, holds

PASSAGE_WORDS = 10
ORDER_WORDS = 6
MIN_FURNITURE_CHARS = 8  # shorter furniture ("— 2 —") would be found in any page of numbers
TABLE_TESTS_PER_TABLE = 4
UNORDERED = (FragmentKind.TABLE, FragmentKind.SIDEBAR)


class TestKind(StrEnum):
    __test__ = False  # a benchmark's kind of test, not a pytest class

    PRESENT = "present"
    ABSENT = "absent"
    ORDER = "order"
    TABLE = "table"


@dataclass(frozen=True)
class DocTest:
    """One test of one document; ``text`` is the passage (or ``before``, or the cell), ``other`` the ``after`` or related cell."""

    __test__ = False

    id: str
    document: str
    kind: TestKind
    text: str
    other: str = ""
    relation: Relation | None = None

    def passes(self, output: str) -> bool:
        if self.kind is TestKind.PRESENT:
            return found(self.text, output)
        if self.kind is TestKind.ABSENT:
            return not found(self.text, output, case_sensitive=False)
        if self.kind is TestKind.ORDER:
            return in_order(self.text, self.other, output)
        assert self.relation is not None
        return holds(self.text, self.relation, self.other, output)

    def as_json(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value not in ("", None)}

    @classmethod
    def from_json(cls, data: dict) -> DocTest:
        relation = Relation(data["relation"]) if data.get("relation") else None
        return cls(data["id"], data["document"], TestKind(data["kind"]), data["text"], data.get("other", ""), relation)


def window(text: str, words: int, rng: random.Random) -> str:
    split = text.split()
    if len(split) <= words:
        return text
    start = rng.randrange(len(split) - words + 1)
    return " ".join(split[start : start + words])


def present_tests(fragments: Iterable[Fragment], rng: random.Random) -> list[tuple[TestKind, str, str, Relation | None]]:
    made: list[tuple[TestKind, str, str, Relation | None]] = []
    for fragment in fragments:
        if fragment.kind is FragmentKind.TABLE:
            continue
        made.append((TestKind.PRESENT, window(fragment.text, PASSAGE_WORDS, rng), "", None))
        if len(fragment.text.split()) > 6 * PASSAGE_WORDS:
            made.append((TestKind.PRESENT, window(fragment.text, PASSAGE_WORDS, rng), "", None))
    return made


def focus_tests(fragments: Iterable[Fragment], focus: frozenset[str]) -> list[tuple[TestKind, str, str, Relation | None]]:
    """A short passage round each word of ``focus`` (a ligature or an accent): short, so that no edit of it is allowed away."""
    made: list[tuple[TestKind, str, str, Relation | None]] = []
    for fragment in fragments:
        words = fragment.text.split()
        for index, word in enumerate(words):
            if word.strip(".,") in focus:
                made.append((TestKind.PRESENT, " ".join(words[max(0, index - 1) : index + 2]), "", None))
    return made


def order_tests(fragments: list[Fragment]) -> list[tuple[TestKind, str, str, Relation | None]]:
    body = [fragment for fragment in fragments if fragment.kind not in UNORDERED]
    made: list[tuple[TestKind, str, str, Relation | None]] = []
    for first, second in itertools.pairwise(body):
        before = " ".join(first.text.split()[-ORDER_WORDS:])
        after = " ".join(second.text.split()[:ORDER_WORDS])
        made.append((TestKind.ORDER, before, after, None))
    return made


def table_tests(fragments: Iterable[Fragment], rng: random.Random) -> list[tuple[TestKind, str, str, Relation | None]]:
    made: list[tuple[TestKind, str, str, Relation | None]] = []
    relations = list(Relation)
    for fragment in fragments:
        if fragment.table is None:
            continue
        rows = (fragment.table.header, *fragment.table.rows)
        cells = [(r, c) for r in range(1, len(rows)) for c in range(1, len(rows[r]))]
        for number, (r, c) in enumerate(rng.sample(cells, min(TABLE_TESTS_PER_TABLE, len(cells)))):
            relation = relations[number % len(relations)]
            if relation is Relation.RIGHT and c == len(rows[r]) - 1:
                relation = Relation.LEFT_HEADING
            if relation is Relation.DOWN and r == len(rows) - 1:
                relation = Relation.TOP_HEADING
            target = {Relation.RIGHT: (r, c + 1), Relation.DOWN: (r + 1, c), Relation.TOP_HEADING: (0, c), Relation.LEFT_HEADING: (r, 0)}
            tr, tc = target[relation]
            made.append((TestKind.TABLE, rows[r][c], rows[tr][tc], relation))
    return made


def absent_tests(furniture: Iterable[str]) -> list[tuple[TestKind, str, str, Relation | None]]:
    unique = dict.fromkeys(text for text in furniture if len(text) >= MIN_FURNITURE_CHARS)
    return [(TestKind.ABSENT, text, "", None) for text in unique]


def tests_for(
    document: str, fragments: list[Fragment], furniture: Iterable[str], seed: int, focus: frozenset[str] = frozenset()
) -> list[DocTest]:
    """Every test of one document, from its fragments (reading order) and the furniture its pages print.

    With ``focus``, the passages are the short ones round those words instead of drawn windows.
    """
    rng = random.Random(seed)
    present = focus_tests(fragments, focus) if focus else present_tests(fragments, rng)
    made = [*present, *absent_tests(furniture), *order_tests(fragments), *table_tests(fragments, rng)]
    return [DocTest(f"{document}:{n:03d}", document, kind, text, other, relation) for n, (kind, text, other, relation) in enumerate(made)]
