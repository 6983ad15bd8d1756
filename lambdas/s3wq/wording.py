"""How counts read in what s3wq prints: "1 group", "3 groups"; one place, for every layer."""

from __future__ import annotations


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``n`` and the noun, singular for exactly one."""
    return f"{n} {noun if n == 1 else plural_form or noun + 's'}"


# What a count of claim conflicts means, wherever one is printed: a race lost at the lock, never work done twice.
CONFLICTS_MEANING = "claim races: another worker claimed the group first; nothing ran twice"
