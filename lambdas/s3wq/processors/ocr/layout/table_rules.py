"""Tables drawn with ruling lines: a grid gives the cells directly; horizontal rules alone (booktabs) give the table's extent.

A grid is a set of rules that meet: its distinct horizontal rules bound the
rows, its vertical ones the columns, and a word is in the cell its centre
falls in. Where a vertical rule stops short of a row, that row's cells on
either side are one cell spanning both, and its text repeats in each.

Booktabs tables have a rule above, one under the header and one below, all
of one width, and no vertical ones: the rules give the table's top, bottom
and sides, and its rows and columns are read from the words between, as an
unruled table's are. A stack of same-width rules with a paragraph between
two of them (two tables of one width, a page's head and foot rules) is cut
there.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

from s3wq.processors.ocr.layout.model import Box, PageWords, Rule
from s3wq.processors.ocr.layout.table_cells import (
    PageLines,
    Table,
    columns_of,
    lines_of,
    rows_of,
    words_in,
)

MEET = 2.0  # points: rules this close to one another meet
SAME_LINE = 3.0  # points: rules whose positions differ by less are one line of the grid
SAME_WIDTH = 0.03  # rules whose ends differ by less than this share of the page's width are of one stack
SHORTEST_RULE = 0.1  # a horizontal rule shorter than this share of the page's width underlines a word, it bounds no table
PROSE_WORDS = 6  # a line between two rules that is one cell of this many words ...
PROSE_SHARE = 0.6  # ... as wide as this share of the rules is a paragraph, not a table's row


def ruled_tables(page: PageWords, text: PageLines) -> list[Table]:
    """The tables drawn with ruling lines on ``page``, whose lines are ``text``: grids first, then booktabs."""
    tables: list[Table] = []
    left_over: list[Rule] = []
    unclaimed = set(range(len(page.words)))
    for group in _meeting(page.rules):
        table = _grid_table(page, unclaimed, group)
        if table is None:
            left_over.extend(rule for rule in group if rule.horizontal)
        else:
            tables.append(table)
            unclaimed -= table.words
    for top, bottom in _stacks(page, text, left_over):
        table = _booktabs_table(text, unclaimed, Box(top.box.left - MEET, top.box.top, top.box.right + MEET, bottom.box.bottom))
        if table is not None:
            tables.append(table)
            unclaimed -= table.words
    return tables


def _meeting(rules: Sequence[Rule]) -> list[list[Rule]]:
    """The rules in groups that meet (touch or cross, within ``MEET``), by union-find."""
    parent = list(range(len(rules)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(rules):
        for j in range(i + 1, len(rules)):
            b = rules[j].box
            if (
                a.box.left - MEET <= b.right
                and b.left - MEET <= a.box.right
                and a.box.top - MEET <= b.bottom
                and b.top - MEET <= a.box.bottom
            ):
                parent[root(i)] = root(j)
    groups: dict[int, list[Rule]] = {}
    for i, rule in enumerate(rules):
        groups.setdefault(root(i), []).append(rule)
    return list(groups.values())


def _distinct(positions: Sequence[float]) -> list[float]:
    lines: list[float] = []
    for position in sorted(positions):
        if not lines or position - lines[-1] > SAME_LINE:
            lines.append(position)
    return lines


def _grid_table(page: PageWords, free: set[int], group: Sequence[Rule]) -> Table | None:
    """The table a grid of rules draws: at least two rows and two columns of cells with words in them."""
    verticals = [rule for rule in group if not rule.horizontal]
    ys = _distinct([rule.box.middle for rule in group if rule.horizontal])
    xs = _distinct([rule.box.centre for rule in verticals])
    if len(ys) < 2 or len(xs) < 3:
        return None
    cells: dict[tuple[int, int], list[int]] = {}
    for index in free:
        box = page.words[index].box
        if xs[0] < box.centre < xs[-1] and ys[0] < box.middle < ys[-1]:
            cells.setdefault((bisect_right(ys, box.middle) - 1, bisect_right(xs, box.centre) - 1), []).append(index)
    rows = []
    for r in range(len(ys) - 1):
        middle = (ys[r] + ys[r + 1]) / 2
        texts: list[str] = []
        for span in _spans(xs, middle, verticals):
            text = _text(page, [i for c in span for i in cells.get((r, c), [])])
            texts.extend([text] * len(span))
        if any(texts):
            rows.append(texts)
    if len(rows) < 2:
        return None
    claimed = frozenset(i for indexes in cells.values() for i in indexes)
    return Table(Box(xs[0], ys[0], xs[-1], ys[-1]), rows, claimed)


def _spans(xs: Sequence[float], middle: float, verticals: Sequence[Rule]) -> Iterator[range]:
    """The grid's columns at height ``middle``, in runs that no vertical rule divides there."""
    start = 0
    for j in range(1, len(xs) - 1):
        if any(abs(v.box.centre - xs[j]) <= SAME_LINE and v.box.top - MEET <= middle <= v.box.bottom + MEET for v in verticals):
            yield range(start, j)
            start = j
    yield range(start, len(xs) - 1)


def _text(page: PageWords, indexes: Sequence[int]) -> str:
    """A cell's words as read: line by line, left to right."""
    return " ".join(page.words[i].text for line in lines_of(page.words, indexes) for i in line)


def _stacks(page: PageWords, text: PageLines, horizontals: Sequence[Rule]) -> Iterator[tuple[Rule, Rule]]:
    """The top and bottom rules of each stack of horizontal rules of one width, cut where a paragraph lies between two of them."""
    tolerance = SAME_WIDTH * page.width
    stacks: list[list[Rule]] = []
    for rule in sorted(horizontals, key=lambda r: r.box.top):
        if rule.box.width < SHORTEST_RULE * page.width:
            continue
        same = [
            s for s in stacks if abs(s[-1].box.left - rule.box.left) <= tolerance and abs(s[-1].box.right - rule.box.right) <= tolerance
        ]
        if same:
            same[-1].append(rule)
        else:
            stacks.append([rule])
    for stack in stacks:
        start = 0
        for k in range(1, len(stack) + 1):
            if k == len(stack) or _holds_prose(text, stack[k - 1], stack[k]):
                if k - 1 > start:
                    yield stack[start], stack[k - 1]
                start = k


def _holds_prose(text: PageLines, above: Rule, below: Rule) -> bool:
    """Whether a line of prose lies between two rules: one cell of many words across most of their width."""
    left, top, right, bottom = above.box.left, above.box.bottom, above.box.right, below.box.top
    return any(
        len(cell.words) >= PROSE_WORDS and cell.box.width >= PROSE_SHARE * above.box.width
        for line in text.cells(lambda i: _within(text.words[i].box, left, top, right, bottom))
        for cell in line.cells
    )


def _within(box: Box, left: float, top: float, right: float, bottom: float) -> bool:
    return left <= box.centre <= right and top <= box.middle <= bottom


def _booktabs_table(text: PageLines, free: set[int], region: Box) -> Table | None:
    """The table between a stack's top and bottom rules: rows and columns from its words, at least two of each."""
    lines = text.cells(lambda i: i in free and _within(text.words[i].box, region.left, region.top, region.right, region.bottom))
    if len(lines) < 2 or 2 * sum(1 for line in lines if len(line.cells) > 1) < len(lines):
        return None
    columns = columns_of(lines)
    if len(columns) < 2:
        return None
    return Table(region, rows_of(lines, columns), words_in(lines))
