"""olmocr's prompt and sampling, as plain constants (no PIL, no numpy), so that the stand-in and the tests of the
main venv can hold a request to them too. query.py builds a page's request with them.
"""

from __future__ import annotations

# olmocr's prompt, verbatim: olmocr 0.4.27 (Apache-2.0), olmocr.prompts.build_no_anchoring_v4_yaml_prompt(). The model
# was trained on this text; a test holds it equal to olmocr's function.
PROMPT = (
    "Attached is one page of a document that you must process. "
    "Just return the plain text representation of this document as if you were reading it naturally. "
    "Convert equations to LateX and tables to HTML.\n"
    "If there are any figures or charts, label them with the following markdown syntax "
    "![Alt text describing the contents of the figure](page_startx_starty_width_height.png)\n"
    "Return your output as markdown, with a front matter section on top specifying values for the primary_language, "
    "is_rotation_valid, rotation_correction, is_table, and is_diagram parameters."
)
# olmocr's TEMPERATURE_BY_ATTEMPT: a retry is hotter, to get past a model repeating itself.
TEMPERATURES = (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)
# The answer's budget (build_page_query's MAX_TOKENS); the context the reply must fit is answer.MODEL_MAX_CONTEXT.
MAX_TOKENS = 8000


def temperature_for(attempt: int) -> float:
    """The temperature of ``attempt`` (from 0), as olmocr picks it: the last one's for every attempt past the list."""
    if attempt < 0:
        raise ValueError(f"attempt {attempt} is not an attempt (they count from 0)")
    return TEMPERATURES[min(attempt, len(TEMPERATURES) - 1)]
