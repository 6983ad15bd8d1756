"""How bench/doc_quality.py judges a system's output: fuzzy passages, their order, and table cells beside and under each other.

The scoring is pure Python (bench/doc_matching.py, doc_tables.py,
doc_tests.py), so it is tested here, in the project's venv, against a plain
edit-distance table and against outputs written as systems write them.
"""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st
from support import REPO_ROOT

sys.path.append(str(REPO_ROOT / "bench"))  # the benchmarks import their helpers as top-level modules

from doc_matching import allowance, found, in_order, match_ends, match_starts, normalized
from doc_tables import Relation, holds, html_tables, markdown_tables
from doc_tests import DocTest, TestKind


def substring_distances(pattern: str, text: str) -> list[int]:
    """Row by row, the least edits from ``pattern`` to a stretch of ``text`` ending at each position (Sellers' table)."""
    previous = [0] * (len(text) + 1)
    for i, char in enumerate(pattern, start=1):
        current = [i] + [0] * len(text)
        for j, other in enumerate(text, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
        previous = current
    return previous


@given(st.text("abc ", min_size=1, max_size=12), st.text("abc ", max_size=30), st.integers(0, 4))
def test_the_bit_parallel_search_finds_what_the_edit_table_finds(pattern, text, edits):
    distances = substring_distances(pattern, text)
    assert match_ends(pattern, text, edits) == [j for j in range(1, len(text) + 1) if distances[j] <= edits]


@given(st.text("ab", min_size=1, max_size=8), st.text("ab", max_size=20))
def test_a_match_starts_where_a_stretch_within_the_allowance_begins(pattern, text):
    for start in match_starts(pattern, text, 1):
        assert any(substring_distances(pattern, text[start:])[end] <= 1 for end in range(1, len(text) - start + 1))


def test_a_passage_is_found_within_one_edit_in_twenty_characters():
    passage = "Annual budget of the harbour committee was"  # 42 characters: two edits allowed
    assert allowance(passage) == 2
    assert found(passage, "... the Annual budgct of the harbour comittee was approved")
    assert not found(passage, "... the Annual budgct of the harhour comittee was approved")


def test_markdown_emphasis_breaks_and_typography_are_not_held_against_a_system():
    assert normalized("**Annual** _budget_\n\n of the  <br> “harbour” — 2") == 'Annual budget of the "harbour" - 2'
    assert found("The office will find", "# The **office** will\nfind it")
    assert not found("The office will find", "The oﬃce will ﬁnd")  # ligature glyphs are not the letters


def test_absent_is_case_insensitive_and_order_needs_before_first():
    absent = DocTest("d:1", "d", TestKind.ABSENT, "Downloaded from https://archive.example.org")
    assert not absent.passes("body text DOWNLOADED FROM HTTPS://ARCHIVE.EXAMPLE.ORG more")
    assert absent.passes("body text only")
    assert in_order("first section", "second section", "the first section then the second section")
    assert not in_order("second section", "first section", "the first section then the second section")
    assert not in_order("first section", "third section", "the first section then the second section")


MARKDOWN = """Some text.

| Area | Q1 | Q2 |
|------|---:|----|
| North | 1,234 | 5,678 |
| South | 2,345 | 6,789 |

After."""

HTML = "<table><tr><th>Area</th><th colspan='2'>Quarters</th></tr><tr><td>North</td><td>1,234</td><td>5,678</td></tr></table>"


def test_markdown_and_html_tables_are_read_as_grids():
    assert markdown_tables(MARKDOWN) == [[["Area", "Q1", "Q2"], ["North", "1,234", "5,678"], ["South", "2,345", "6,789"]]]
    assert html_tables(HTML) == [[["Area", "Quarters", "Quarters"], ["North", "1,234", "5,678"]]]


def test_a_cell_relation_holds_only_where_the_table_has_it():
    assert holds("1,234", Relation.RIGHT, "5,678", MARKDOWN)
    assert holds("1,234", Relation.DOWN, "2,345", MARKDOWN)
    assert holds("6,789", Relation.TOP_HEADING, "Q2", MARKDOWN)
    assert holds("6,789", Relation.LEFT_HEADING, "South", MARKDOWN)
    assert not holds("1,234", Relation.DOWN, "6,789", MARKDOWN)
    assert not holds("1,234", Relation.RIGHT, "5,678", "North 1,234 5,678")  # loose lines are no table
    assert holds("5,678", Relation.TOP_HEADING, "Quarters", HTML)
