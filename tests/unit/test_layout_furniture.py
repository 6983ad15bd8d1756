"""Page furniture out of the body: running heads and feet, page numbers, banners; by place, repetition and pattern."""

from __future__ import annotations

from collections import Counter

from helpers.layout_pages import Placed, block_of, layout_page, line_of, paragraph, placed_line, upright_words, wrapped
from hypothesis import given
from hypothesis import strategies as st

from s3wq.processors.ocr.layout.furniture import strip_furniture
from s3wq.processors.ocr.layout.model import BlockKind, FurnitureKind, PageLayout

BODY = (
    "Measurements were taken at dawn on each of the forty days, and the readings of the two instruments were compared "
    "against the tables kept at the observatory since its founding, which allowed a correction for drift to be applied."
)
TITLE = "On the Drift of Instruments"


def body(top: float = 120.0) -> list:
    return [paragraph(wrapped(BODY, 90), 72, top), paragraph(wrapped(BODY, 90), 72, top + 120)]


def journal_page(number: int) -> PageLayout:
    """A page of an article: a running head (the journal's name and page, or the title on even pages), the body, a page number."""
    head = f"Journal of Applied Things, Vol. 12, 2019 · {344 + number}" if number % 2 else TITLE
    blocks = [paragraph([head], 72, 30, size=8), *body(), paragraph([str(number)], 300, 750)]
    if number == 1:
        blocks.insert(1, block_of([placed_line(Placed(TITLE, 72, 48, 18))], BlockKind.HEADING, level=1))
    return layout_page(blocks, number=number)


def test_running_heads_and_page_numbers_leave_the_body_of_every_page_and_the_first_page_keeps_its_title():
    pages = [journal_page(n) for n in range(1, 6)]

    strip_furniture(pages)

    for page in pages:
        assert "Journal" not in page.text and f"\n{page.number}" not in page.text and not page.text.endswith(str(page.number))
        kinds = Counter(f.kind for f in page.furniture)
        assert kinds == Counter({FurnitureKind.PAGE_NUMBER: 1, FurnitureKind.HEADER: 1})
        assert BODY[:40] in page.text
    assert pages[0].blocks[0].kind is BlockKind.HEADING and pages[0].blocks[0].text == TITLE
    assert all(TITLE not in page.text for page in pages[1:])


def test_a_one_page_article_loses_its_downloaded_from_banner_and_its_page_number():
    banner = "Downloaded from https://academic.example.org/journal/article/12/3/345/6789 by guest on 3 May 2024"
    page = layout_page([paragraph([TITLE], 72, 72, size=16), *body(), paragraph(["17"], 300, 740), paragraph([banner], 72, 770, size=7)])

    strip_furniture([page])

    assert {(f.kind, f.text) for f in page.furniture} == {(FurnitureKind.PAGE_NUMBER, "17"), (FurnitureKind.BANNER, banner)}
    assert page.text.startswith(TITLE) and "Downloaded" not in page.text


def test_a_vertical_banner_in_the_side_margin_is_a_banner_whatever_it_says():
    banner = line_of(upright_words("Preprint submitted to the Journal of Applied Things", 20, 200))
    page = layout_page([block_of([banner]), *body()])

    strip_furniture([page])

    assert [(f.kind, f.text) for f in page.furniture] == [(FurnitureKind.BANNER, banner.text)]
    assert "Preprint" not in page.text


def test_a_page_number_set_as_the_last_line_of_a_paragraph_is_split_off_and_the_paragraph_stays():
    lines = [*wrapped(BODY, 90)]
    block = paragraph(lines, 72, 660)  # its lines run down into the page's foot
    block.lines.append(placed_line(Placed("Page 3 of 9", 280, 760)))
    page = layout_page([block], number=3)

    strip_furniture([page])

    assert [(f.kind, f.text) for f in page.furniture] == [(FurnitureKind.PAGE_NUMBER, "Page 3 of 9")]
    assert page.blocks[0].lines[-1].text == lines[-1] and page.blocks[0].box.bottom < 760


def test_copyright_doi_and_electronic_copy_lines_at_a_page_foot_are_banners_but_a_number_in_the_body_is_not():
    feet = [
        "© 2019 The Authors. Published by Example Press.",
        "https://doi.org/10.1234/abcd.5678",
        "Electronic copy available at: ssrn.com/1",
    ]
    page = layout_page([*body(), paragraph(["42"], 300, 400), *(paragraph([t], 72, 720 + 14 * k, size=7) for k, t in enumerate(feet))])

    strip_furniture([page])

    assert [f.text for f in page.furniture if f.kind is FurnitureKind.BANNER] == feet
    assert "42" in page.text


def test_a_line_at_the_top_of_one_page_only_that_reads_as_no_furniture_stays():
    page = layout_page([paragraph(["Chapter notes and sources"], 72, 30), *body()])

    strip_furniture([page])

    assert page.furniture == [] and page.text.startswith("Chapter notes")


TEXTS = st.sampled_from(["12", "Page 3 of 9", "iv", "Journal of X, Vol. 2", "Downloaded from https://x.org", BODY[:60], "© 2020", TITLE])


@st.composite
def documents(draw: st.DrawFn) -> list[PageLayout]:
    pages = []
    for number in range(1, draw(st.integers(1, 4)) + 1):
        blocks = []
        for _ in range(draw(st.integers(0, 5))):
            tops = draw(st.lists(st.sampled_from([20.0, 30.0, 200.0, 400.0, 740.0, 770.0]), min_size=1, max_size=3))
            lines = [placed_line(Placed(draw(TEXTS), draw(st.sampled_from([10.0, 72.0, 580.0])), top)) for top in tops]
            blocks.append(block_of(lines, draw(st.sampled_from(list(BlockKind)))))
        pages.append(layout_page(blocks, number=number))
    return pages


def line_texts(pages: list[PageLayout]) -> Counter[str]:
    return Counter(line.text for page in pages for block in page.blocks for line in block.lines) + Counter(
        f.text for page in pages for f in page.furniture
    )


@given(documents())
def test_no_text_is_lost_or_doubled_and_no_block_is_left_empty(pages):
    before = line_texts(pages)

    strip_furniture(pages)

    assert line_texts(pages) == before
    assert all(block.lines for page in pages for block in page.blocks)
