"""cdk-nag's AwsSolutions pack: no unsuppressed finding, and every suppression says why."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Annotations, Match
from stack_under_test import EXISTING_BUCKET, VARIANTS, WORKER_VARIANTS, nag_reason

MIN_REASON_LENGTH = 30


def _describe(messages) -> list[str]:
    return [f"{message.id}: {message.entry.data}" for message in messages]


@pytest.mark.parametrize("overrides", [*VARIANTS.values(), *WORKER_VARIANTS.values()], ids=[*VARIANTS, *WORKER_VARIANTS])
def test_no_aws_solutions_errors_or_warnings(synth, overrides):
    annotations = Annotations.from_stack(synth(overrides).stack)
    rule = Match.string_like_regexp("AwsSolutions-.*")
    assert _describe(annotations.find_error("*", rule)) == []
    assert _describe(annotations.find_warning("*", rule)) == []


def _suppressions(stack) -> list[tuple[str, dict]]:
    """(where, rule) for every cdk-nag suppression in the template's metadata."""
    found = [("stack", rule) for rule in stack.json.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])]
    for logical_id, resource in stack.resources.items():
        found += [(logical_id, rule) for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])]
    return found


@pytest.mark.parametrize("overrides", [{}, EXISTING_BUCKET], ids=["default", "existing-bucket"])
def test_every_suppression_gives_a_reason(synth, overrides):
    suppressions = _suppressions(synth(overrides))
    assert suppressions, "no cdk_nag metadata found: has the suppression format changed?"
    for where, rule in suppressions:
        print(f"{rule['id']:<20} {where:<70} {nag_reason(rule)[:80]}")
    short = [(where, rule["id"], nag_reason(rule)) for where, rule in suppressions if len(nag_reason(rule).strip()) < MIN_REASON_LENGTH]
    assert not short, f"reasons shorter than {MIN_REASON_LENGTH} characters: {short}"


def test_wildcard_suppressions_name_what_they_cover(stack):
    """An IAM5 suppression without applies_to would silence every wildcard on that resource, now and later."""
    for where, rule in _suppressions(stack):
        if rule["id"] in ("AwsSolutions-IAM4", "AwsSolutions-IAM5"):
            assert rule.get("applies_to"), f"{rule['id']} on {where} applies to everything"
            # Wildcard actions are never excused.
            patterns = [entry if isinstance(entry, str) else entry.get("regex", "") for entry in rule["applies_to"]]
            assert not [pattern for pattern in patterns if "Action::" in pattern], where
