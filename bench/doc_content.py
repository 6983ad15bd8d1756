"""The known content of the document corpus: what a page says, block by block, drawn from a seeded ``random.Random``.

A document is a stream of blocks (headings, paragraphs, list items, tables)
with a sidebar and its page furniture (a running header, page numbers, a
"Downloaded from" banner). doc_layout.py flows the stream onto pages; what
it places is what the corpus's tests (doc_tests.py) are made from, so no
test is written by hand.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from ocr_pages import WORDS

# Labels of table rows: the names a report's table has down its left side.
ROW_LABELS = """North South East West Central Harbour Eastfield Riverside Hillcrest Lakeside Millbrook Oakridge Pinewood
Stonebridge Westgate Ashford Brookside Fairview Greenway Kingsway""".split()
JOURNALS = ("Journal of Applied Hydrology", "Review of Municipal Finance", "Quarterly Bulletin of Estate Records")
SITES = ("archive.example.org", "records.example.net", "library.example.edu")


class Layout(StrEnum):
    """The page designs of the corpus: columns, and what else their pages carry."""

    REPORT = "report"  # one column, a ruled table, bullet lists, a "Downloaded from" banner
    JOURNAL = "journal"  # two columns, a sidebar box, an unruled table, a running header with the journal's name
    NEWSLETTER = "newsletter"  # three columns, numbered lists, a ruled table

    @property
    def columns(self) -> int:
        return {Layout.REPORT: 1, Layout.JOURNAL: 2, Layout.NEWSLETTER: 3}[self]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class ListItem:
    marker: str  # "•" or "3."
    text: str


@dataclass(frozen=True)
class Table:
    """A table with a header row, its first column the rows' labels; every data cell's text is unique in the document."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    ruled: bool


@dataclass(frozen=True)
class Sidebar:
    title: str
    text: str


Block = Heading | Paragraph | ListItem | Table


@dataclass(frozen=True)
class Furniture:
    """What every page of a document carries besides its body; ``footer`` has ``{page}`` and ``{pages}`` in it."""

    header: str
    footer: str
    banner: str | None

    def footer_of(self, page: int, pages: int) -> str:
        return self.footer.format(page=page, pages=pages)


class Sentences:
    """Seeded sentences of everyday report English (ocr_pages.WORDS), with a few numbers, as a report has them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def word(self) -> str:
        if self.rng.random() < 0.05:
            return str(
                self.rng.choice(
                    [self.rng.randint(2, 99), self.rng.randint(1900, 2024), f"{self.rng.randint(1, 99)}.{self.rng.randint(1, 9)}"]
                )
            )
        return self.rng.choice(WORDS)

    def sentence(self) -> str:
        words = [self.word() for _ in range(self.rng.randint(7, 16))]
        for index in range(2, len(words) - 2):
            if self.rng.random() < 0.07:
                words[index] += ","
        return " ".join(words).capitalize() + "."

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(3, 6)))

    def title(self, low: int = 2, high: int = 5) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high))).capitalize()


def furniture_of(layout: Layout, rng: random.Random) -> Furniture:
    journal = rng.choice(JOURNALS)
    volume, issue, year = rng.randint(3, 60), rng.randint(1, 4), rng.randint(1990, 2023)
    stable = rng.randint(10000, 99999)
    banner = f"Downloaded from https://{rng.choice(SITES)}/stable/{stable} on {rng.randint(1, 28)} March {year + 1}"
    if layout is Layout.REPORT:
        return Furniture(header=f"Annual Report {year} · Internal Review", footer="Page {page} of {pages}", banner=banner)
    if layout is Layout.JOURNAL:
        return Furniture(header=f"{journal} · Vol. {volume}, No. {issue} ({year})", footer="— {page} —", banner=banner)
    return Furniture(header=f"Parish Newsletter · Issue {volume} · {year}", footer="Newsletter page {page} of {pages}", banner=None)


def table_of(layout: Layout, rng: random.Random, used: set[str]) -> Table:
    """A table whose data cells are all distinct numbers (never one the document already has), so a cell names one place."""
    columns = 3 if layout.columns > 1 else 5
    header = ("Area", *(f"Q{quarter}" for quarter in range(1, columns)))
    rows = []
    for label in rng.sample(ROW_LABELS, rng.randint(4, 6)):
        cells = []
        for _ in range(columns - 1):
            value = f"{rng.randint(1, 9)},{rng.randint(100, 999)}"
            while value in used:
                value = f"{rng.randint(1, 9)},{rng.randint(100, 999)}"
            used.add(value)
            cells.append(value)
        rows.append((label, *cells))
    return Table(header=header, rows=tuple(rows), ruled=layout is not Layout.JOURNAL)


def blocks_of(layout: Layout, rng: random.Random) -> Iterator[Block]:
    """An endless stream of numbered sections; the layout takes what fits its pages."""
    sentences = Sentences(rng)
    used: set[str] = set()
    section = 0
    while True:
        section += 1
        yield Heading(f"{section}. {sentences.title()}", level=1)
        for _ in range(rng.randint(1, 3)):
            yield Paragraph(sentences.paragraph())
        if section % 2 == 1:
            bullet = layout is not Layout.NEWSLETTER
            for item in range(1, rng.randint(3, 4) + 1):
                yield ListItem("•" if bullet else f"{item}.", sentences.sentence())
        if section % 3 == 2:
            yield table_of(layout, rng, used)
        yield Paragraph(sentences.paragraph())


def sidebar_of(layout: Layout, rng: random.Random) -> Sidebar | None:
    if layout is Layout.JOURNAL:
        sentences = Sentences(rng)
        return Sidebar(title=f"Box 1. {sentences.title(2, 3)}", text=" ".join(sentences.sentence() for _ in range(3)))
    return None


def title_of(rng: random.Random) -> str:
    return Sentences(rng).title(4, 7)
