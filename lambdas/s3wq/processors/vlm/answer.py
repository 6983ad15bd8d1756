"""The model's reply judged as olmocr 0.4.27's ``try_single_page`` judges it, and its answer read as olmocr's
``FrontMatterParser(front_matter_class=PageResponse)`` reads it.

An answer is YAML front matter (``---`` lines around five keys), then the
page's text. What olmocr accepts is accepted here and nothing else, value for
value, quirks included, because a page olmocr would retry must be retried
here too: the test (tests/ocr/test_vlm_olmocr.py) runs olmocr's parser on
generated answers beside this one. Its quirks, kept:

* the answer must start with exactly ``---\\n``; the front matter ends at the
  first ``\\n---`` after it (so ``\\n----`` ends it too, the dash left over
  starting the text);
* YAML 1.1's words are booleans (``yes``, ``off``...); a quoted boolean is
  true when it reads ``true`` in any case, and false otherwise;
* ``primary_language``: a boolean (YAML's ``no`` for Norwegian) or an empty
  value is None; a number is refused;
* ``rotation_correction``: a string is read with Python's ``int()``; YAML's
  ``false`` passes as 0 (Python's ``False == 0``) and is kept as 0 here;
* no key may be missing and none added (``natural_text`` is the text after
  the front matter, None when there is none, never a key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs in .venv (types-PyYAML is a package of its own)

from s3wq.errors import S3wqError

# The context a reply must fit in (try_single_page's MODEL_MAX_CONTEXT): past it, the answer was cut short.
MODEL_MAX_CONTEXT = 16384
# The front matter's keys, in the order olmocr looks for them (the first one missing is the one named).
_FIELDS = ("primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram")
_ROTATIONS = frozenset((0, 90, 180, 270))
_OPENING = "---\n"
_CLOSING = "\n---"


class MalformedAnswer(S3wqError):
    """The model's answer is not one olmocr would accept (no front matter, bad YAML, a key missing, added or of the
    wrong type): that attempt at the page failed."""


@dataclass(frozen=True)
class PageAnswer:
    """What the model said of a page: olmocr's PageResponse, field for field."""

    primary_language: str | None
    is_rotation_valid: bool
    rotation_correction: int
    is_table: bool
    is_diagram: bool
    natural_text: str | None


@dataclass(frozen=True)
class Judged:
    """A reply judged: its ``answer`` (None where olmocr's attempt has none: unparseable, or the reply not a
    completion), whether it is ``valid`` (it stopped of itself, ``finish_reason`` "stop", within the model's context;
    False for a reply that is not a completion), the tokens it cost (0 where the reply does not say), and ``why`` it
    is not usable, in one line ("" when it is)."""

    answer: PageAnswer | None
    valid: bool
    input_tokens: int
    output_tokens: int
    why: str = ""

    @property
    def usable(self) -> bool:
        """A valid reply with an answer: what olmocr may keep (a page said to be rotated is still to be turned)."""
        return self.valid and self.answer is not None


def parse_answer(content: str) -> PageAnswer:
    """The answer in ``content``, as olmocr's FrontMatterParser reads it; raise MalformedAnswer where olmocr raises."""
    front, text = _front_matter(content)
    missing = [name for name in _FIELDS if name not in front]
    if missing:
        raise MalformedAnswer(f"the answer's front matter has no {missing[0]}")
    extra = set(front) - set(_FIELDS)
    if extra:
        raise MalformedAnswer(f"the answer's front matter has keys olmocr's has not: {', '.join(sorted(map(repr, extra)))[:200]}")
    return PageAnswer(
        primary_language=_language(front["primary_language"]),
        is_rotation_valid=_boolean(front, "is_rotation_valid"),
        rotation_correction=_rotation(front["rotation_correction"]),
        is_table=_boolean(front, "is_table"),
        is_diagram=_boolean(front, "is_diagram"),
        natural_text=text or None,
    )


def _front_matter(content: str) -> tuple[dict[Any, Any], str]:
    """The front matter as a mapping, and the text after it (stripped)."""
    if not content.startswith(_OPENING):
        raise MalformedAnswer("the answer does not start with front matter (a --- line)")
    end = content.find(_CLOSING, len(_OPENING))
    if end < 0:
        raise MalformedAnswer("the answer's front matter has no closing --- line")
    try:
        # olmocr's safe_load, whatever it raises: a front matter YAML cannot build (a bad date, nesting past the stack
        # as much as a syntax error) fails olmocr's attempt, and so this one.
        loaded = yaml.safe_load(content[len(_OPENING) : end])
    except Exception as exc:  # noqa: BLE001 -- any failure of the loader is the answer's, named in the message
        raise MalformedAnswer(f"the answer's front matter is not YAML: {' '.join(str(exc).split())[:200]}") from None
    if not loaded:
        loaded = {}  # olmocr's `or {}`: an empty front matter lacks every key
    if not isinstance(loaded, dict):
        raise MalformedAnswer(f"the answer's front matter is a {type(loaded).__name__}, not a mapping")
    return loaded, content[end + len(_CLOSING) :].strip()


def _language(value: Any) -> str | None:
    if isinstance(value, bool) or not value:
        return None
    if not isinstance(value, str):
        raise MalformedAnswer(f"primary_language is a {type(value).__name__}, not a language code")
    return value


def _boolean(front: dict[Any, Any], name: str) -> bool:
    value = front[name]
    if isinstance(value, str):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise MalformedAnswer(f"{name} is a {type(value).__name__}, not true or false")
    return value


def _rotation(value: Any) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise MalformedAnswer(f"rotation_correction {_shown(value)} is not a number") from None
    # olmocr's test: one of the four (a set's ==, so YAML's false passes as 0), then an int (so 90.0 does not).
    try:
        known = value in _ROTATIONS
    except TypeError:  # a list or a mapping: olmocr's set lookup raises
        known = False
    if not known or not isinstance(value, int):
        raise MalformedAnswer(f"rotation_correction {_shown(value)} is none of 0, 90, 180, 270")
    return int(value)


def _shown(value: Any) -> str:
    """A value for a message: a scalar as written (cut short), anything else by its type, never walked (YAML's aliases
    make a few lines of front matter a structure that would print as billions of items)."""
    return repr(value)[:40] if isinstance(value, str | int | float | None) else f"a {type(value).__name__}"


def judge_reply(data: Any) -> Judged:
    """A chat-completions reply (its decoded JSON) judged as try_single_page judges it."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return Judged(None, False, 0, 0, "the reply has no usage: not a chat completion")
    counts = (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
    if not all(isinstance(count, int | float) for count in counts):  # olmocr adds them up, and fails: no answer
        return Judged(None, False, 0, 0, "the reply's usage counts tokens in something that is not a number")
    tokens = (_count(counts[0]), _count(counts[1]))
    total = usage.get("total_tokens")
    if not isinstance(total, int | float):  # olmocr's comparison raises for anything else: no answer
        return Judged(None, False, *tokens, why="the reply's usage has no total_tokens")
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or "finish_reason" not in choice:
        return Judged(None, False, *tokens, why="the reply has no choice with a finish_reason")
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        return Judged(None, False, *tokens, why="the reply's choice has no message content")
    problems = []
    if total > MODEL_MAX_CONTEXT:
        problems.append(f"the reply took {total} tokens, past the model's context of {MODEL_MAX_CONTEXT}")
    if choice["finish_reason"] != "stop":
        problems.append(f"the answer stopped for {_shown(choice['finish_reason'])}, not 'stop'")
    valid = not problems
    try:
        answer: PageAnswer | None = parse_answer(content)
    except MalformedAnswer as exc:
        answer = None
        problems.append(str(exc))
    return Judged(answer, valid, *tokens, why="; ".join(problems))


def _count(value: float) -> int:
    """A token count as a whole number, 0 for one that is not (olmocr sums whatever the reply says)."""
    return int(value) if value == value and 0 <= value < 2**63 else 0
