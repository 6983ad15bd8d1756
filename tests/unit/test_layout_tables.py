"""Tables from geometry: ruled grids, booktabs, unruled tables by alignment; and what only looks like a table."""

from __future__ import annotations

from collections import Counter

from helpers.layout_pages import (
    CHAR_EMS,
    Placed,
    horizontal_rule,
    page_words,
    stacked,
    vertical_rule,
    wrapped,
)
from hypothesis import given
from hypothesis import strategies as st

from s3wq.processors.ocr.layout.model import Box, PageWords, Source, Word
from s3wq.processors.ocr.layout.tables import Table, find_tables

PROSE = (
    "The committee met on the first Monday of every month to review the accounts of the parish, and its minutes record "
    "in some detail the disputes that arose over the upkeep of the roads, the hedges and the bridge across the river, "
    "which had been washed away twice in living memory and rebuilt at great expense to the ratepayers of the district."
)
EM = 10 * CHAR_EMS  # a character's width at size 10


def texts_of(page: PageWords, table: Table) -> list[str]:
    return sorted(page.words[i].text for i in table.words)


def test_a_ruled_grid_gives_its_cells_and_a_header_spanning_two_columns_repeats():
    xs, ys = (72.0, 200.0, 320.0, 440.0), (100.0, 120.0, 140.0, 160.0)
    cells = [["Region", "", ""], ["North", "1,204", "12.5 %"], ["South", "987", "9.1 %"]]
    cells[0][1] = "Sales and share"  # spans the second and third columns: no rule between them in the first row
    placed = [Placed(text, xs[c] + 4, ys[r] + 5) for r, row in enumerate(cells) for c, text in enumerate(row) if text]
    rules = [horizontal_rule(xs[0], xs[-1], y) for y in ys]
    rules += [vertical_rule(xs[0], ys[0], ys[-1]), vertical_rule(xs[1], ys[0], ys[-1]), vertical_rule(xs[3], ys[0], ys[-1])]
    rules += [vertical_rule(xs[2], ys[1], ys[-1])]
    page = page_words([Placed("A sentence above the table.", 72, 80), *placed], rules)

    (table,) = find_tables(page)

    assert table.rows == [
        ["Region", "Sales and share", "Sales and share"],
        ["North", "1,204", "12.5 %"],
        ["South", "987", "9.1 %"],
    ]
    assert "sentence" not in texts_of(page, table)


def test_a_booktabs_table_of_horizontal_rules_only_is_read_between_its_top_and_bottom_rules():
    rows = ["Model        Params    Score", "Small           12M     71.2", "Medium         140M     75.9", "Large         1.2B     80.3"]
    top = 200.0
    lines = stacked(rows, 100, top + 4)
    rules = [horizontal_rule(96, 260, top), horizontal_rule(96, 260, top + 16), horizontal_rule(96, 260, top + 4 + 4 * 12)]
    prose = stacked(wrapped(PROSE, 80), 72, 100) + stacked(wrapped(PROSE, 80), 72, 300)
    page = page_words([*prose, *lines], rules)

    (table,) = find_tables(page)

    assert table.rows == [["Model", "Params", "Score"], ["Small", "12M", "71.2"], ["Medium", "140M", "75.9"], ["Large", "1.2B", "80.3"]]
    assert len(table.words) == 12


def test_an_unruled_table_with_a_right_aligned_number_column_and_an_empty_cell():
    rows = ["Fruit        Count     Origin", "Apples          12     Kent", "Pears          140", "Plums            7     Essex"]
    prose_above = stacked(wrapped(PROSE, 90), 72, 100)
    table_top = prose_above[-1].top + 30
    prose_below = stacked(wrapped(PROSE, 90), 72, table_top + 80)
    page = page_words([*prose_above, *stacked(rows, 72, table_top), *prose_below])

    (table,) = find_tables(page)

    assert table.rows == [["Fruit", "Count", "Origin"], ["Apples", "12", "Kent"], ["Pears", "140", ""], ["Plums", "7", "Essex"]]
    assert texts_of(page, table) == sorted(" ".join(rows).split())


def test_a_cell_on_two_lines_stays_one_cell_of_its_row():
    rows = [
        "Name       Role                 Since",
        "Ada        Chief engineer       1843",
        "           and analyst",
        "Charles    Designer             1822",
    ]
    page = page_words(stacked(rows, 72, 100))

    (table,) = find_tables(page)

    assert table.rows == [["Name", "Role", "Since"], ["Ada", "Chief engineer and analyst", "1843"], ["Charles", "Designer", "1822"]]


def two_columns(left_lines: list[Placed], right_text: str, top: float = 72.0) -> list[Placed]:
    """A page of two columns: the given left column, and prose in the right one from ``top``."""
    return [*left_lines, *stacked(wrapped(right_text, 44), 320, top)]


def test_a_table_in_one_column_of_a_two_column_page_is_found_within_that_column():
    left = stacked(wrapped(PROSE, 44), 56, 72)
    table_top = left[-1].top + 24
    rows = ["Year     Wheat     Barley", "1851       412        97", "1861       388       102", "1871       405        88"]
    after = stacked(wrapped(PROSE, 44), 56, table_top + 60)
    # The right column's paragraph ends on a short line beside the table's second row, where a run of cells could take it in.
    right = [*wrapped(PROSE + " " + PROSE, 44)[: len(left) + 2], "It ends here.", *wrapped(PROSE, 44)]
    page = page_words([*left, *stacked(rows, 56, table_top), *after, *stacked(right, 320, 72)])

    (table,) = find_tables(page)

    assert table.rows == [["Year", "Wheat", "Barley"], ["1851", "412", "97"], ["1861", "388", "102"], ["1871", "405", "88"]]
    assert table.box.right < 300


def test_labels_scattered_over_a_figure_are_not_a_table():
    labels = [
        ("Input", 72, 100),
        ("Output", 250, 100),
        ("Hidden layer", 84, 112),
        ("Softmax", 262, 112),
        ("Loss", 96, 124),
        ("Gradient step", 236, 124),
    ]
    page = page_words([Placed(text, left, top) for text, left, top in labels])

    assert find_tables(page) == []


def test_two_columns_of_prose_are_not_a_table():
    paragraphs = [PROSE, "Short one.", PROSE[:200], "It ended.", PROSE]
    left = stacked([line for p in paragraphs for line in wrapped(p, 44)], 56, 72)
    page = page_words(two_columns(left, " ".join(reversed(paragraphs))))

    assert find_tables(page) == []


def test_three_narrow_columns_of_prose_are_not_a_table():
    columns = [stacked(wrapped(PROSE, 28), left, 72) for left in (56, 216, 376)]
    page = page_words([p for column in columns for p in column])

    assert find_tables(page) == []


def test_a_list_with_hanging_indents_is_not_a_table():
    items = [PROSE[:150], PROSE[150:260], PROSE[:120]]
    placed = []
    top = 100.0
    for number, item in enumerate(items, start=1):
        lines = wrapped(item, 60)
        placed.append(Placed(f"{number}.", 72, top))
        placed += stacked(lines, 72 + 5 * EM, top)
        top += len(lines) * 12 + 6
    page = page_words(placed)

    assert find_tables(page) == []


def test_a_list_of_short_items_is_not_a_table():
    page = page_words(stacked(["•    Apples from Kent", "•    Pears", "•    Plums and damsons", "•    Cherries"], 72, 100))

    assert find_tables(page) == []


def test_a_form_of_label_and_value_lines_written_as_prose_is_not_a_table():
    form = ["Name: Jane Smith", "Date of birth: 3 May 1970", "Address: 12 High Street, Bath", "Telephone: 01225 000000"]
    page = page_words(stacked(form, 72, 100))

    assert find_tables(page) == []


def test_ocr_words_of_jittered_boxes_still_make_the_table():
    rows = ["Item      Qty     Price", "Nails      200      4.50", "Screws      75      3.20", "Bolts       12     11.00"]
    laid = page_words(stacked(rows, 90, 140))
    jittered = [  # an OCR engine's boxes: a little off, each as tall as it found the word (its size)
        Word(
            w.text,
            Box(w.box.left + k % 2 * 0.8, w.box.top - k % 3 * 0.6, w.box.right + k % 3 * 0.5, w.box.bottom + k % 2),
            10 + k % 3 * 0.6,
        )
        for k, w in enumerate(laid.words)
    ]
    page = PageWords(1, 612, 792, jittered, Source.OCR)

    (table,) = find_tables(page)

    assert table.rows == [["Item", "Qty", "Price"], ["Nails", "200", "4.50"], ["Screws", "75", "3.20"], ["Bolts", "12", "11.00"]]


WORDS = st.sampled_from(["12", "Total", "a", "of", "7.5", "Kent", "the", "—", "North", "1,204"])
PLACED = st.builds(
    Placed,
    st.lists(st.tuples(WORDS, st.integers(1, 8)), min_size=1, max_size=6).map(lambda ws: "".join(w + " " * gap for w, gap in ws)),
    st.floats(0, 500),
    st.floats(0, 700),
    st.sampled_from([8.0, 10.0, 12.0]),
)
RULES = st.builds(
    lambda x, y, length, horizontal: horizontal_rule(x, x + length, y) if horizontal else vertical_rule(x, y, y + length),
    st.floats(0, 500),
    st.floats(0, 700),
    st.floats(5, 400),
    st.booleans(),
)


@st.composite
def tabular(draw: st.DrawFn) -> tuple[list[Placed], list[Box]]:
    """A table's rows at one place, ruled as a grid, as booktabs or not at all: what the noise around it may overlap."""
    left, top, rows = draw(st.floats(0, 300)), draw(st.floats(0, 500)), draw(st.integers(2, 6))
    texts = [" ".join(f"{draw(WORDS):<10}" for _ in range(3)) for _ in range(rows)]
    placed = stacked(texts, left + 2, top + 2, leading=1.5)
    bottom, right = top + rows * 15, left + 30 * EM
    rules = {
        "grid": [horizontal_rule(left, right, top + r * 15) for r in range(rows + 1)]
        + [vertical_rule(left + c * 10 * EM, top, bottom) for c in range(4)],
        "booktabs": [horizontal_rule(left, right, top), horizontal_rule(left, right, top + 15), horizontal_rule(left, right, bottom)],
        "none": [],
    }[draw(st.sampled_from(["grid", "booktabs", "none"]))]
    return placed, rules


@given(tabular(), st.lists(PLACED, max_size=30), st.lists(RULES, max_size=8))
def test_no_word_is_claimed_twice_and_a_table_holds_the_words_it_claims(table, placed, rules):
    page = page_words([*table[0], *placed], [*table[1], *rules])

    tables = find_tables(page)

    claims = Counter(i for table in tables for i in table.words)
    assert all(count == 1 for count in claims.values())
    assert all(0 <= i < len(page.words) for i in claims)
    for table in tables:
        assert len(table.rows) >= 2 and all(len(row) == len(table.rows[0]) for row in table.rows)
        assert {w for row in table.rows for cell in row for w in cell.split()} == {page.words[i].text for i in table.words}
        assert all(table.box.overlap(page.words[i].box) > 0 or page.words[i].box.area == 0 for i in table.words)


def test_an_empty_page_has_no_tables():
    assert find_tables(PageWords(1, 612, 792, [], Source.OCR)) == []
    assert Box(0, 0, 1, 1).area == 1
