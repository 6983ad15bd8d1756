"""cdk-nag's AwsSolutions pack: no unsuppressed finding, and every suppression says why."""

from __future__ import annotations

import pytest
from stack_under_test import EXISTING_BUCKET, VARIANTS, WORKER_VARIANTS, aws_solutions_findings, nag_reason, nag_suppressions

MIN_REASON_LENGTH = 30


@pytest.mark.parametrize("overrides", [*VARIANTS.values(), *WORKER_VARIANTS.values()], ids=[*VARIANTS, *WORKER_VARIANTS])
def test_no_aws_solutions_errors_or_warnings(synth, overrides):
    assert aws_solutions_findings(synth(overrides)) == []


@pytest.mark.parametrize("overrides", [{}, EXISTING_BUCKET], ids=["default", "existing-bucket"])
def test_every_suppression_gives_a_reason(synth, overrides):
    suppressions = nag_suppressions(synth(overrides))
    assert suppressions, "no cdk_nag metadata found: has the suppression format changed?"
    for where, rule in suppressions:
        print(f"{rule['id']:<20} {where:<70} {nag_reason(rule)[:80]}")
    short = [(where, rule["id"], nag_reason(rule)) for where, rule in suppressions if len(nag_reason(rule).strip()) < MIN_REASON_LENGTH]
    assert not short, f"reasons shorter than {MIN_REASON_LENGTH} characters: {short}"


def test_wildcard_suppressions_name_what_they_cover(stack):
    """An IAM5 suppression without applies_to would silence every wildcard on that resource, now and later."""
    for where, rule in nag_suppressions(stack):
        if rule["id"] in ("AwsSolutions-IAM4", "AwsSolutions-IAM5"):
            assert rule.get("applies_to"), f"{rule['id']} on {where} applies to everything"
            # Wildcard actions are never excused.
            patterns = [entry if isinstance(entry, str) else entry.get("regex", "") for entry in rule["applies_to"]]
            assert not [pattern for pattern in patterns if "Action::" in pattern], where
