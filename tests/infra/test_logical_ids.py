"""Deployments made before S3wqQueue existed keep every resource: the stack's logical IDs are the ones recorded then.

fixtures/logical_ids.json was synthesized from the stack as it was before
the construct (bundling off, each context variant of stack_under_test). A
changed logical ID would make CloudFormation replace that resource on the
next deploy (a new bucket, a new state machine, lost logs), so this is the one
place where tests name logical IDs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stack_under_test import VARIANTS

RECORDED = json.loads((Path(__file__).resolve().parent / "fixtures" / "logical_ids.json").read_text())


def test_every_variant_is_recorded():
    assert sorted(RECORDED) == sorted(VARIANTS)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_stack_keeps_the_logical_ids_it_had_before_the_construct(synth, name):
    template = synth(VARIANTS[name]).json
    assert sorted(template["Resources"]) == RECORDED[name]["Resources"]
    assert sorted(template.get("Outputs", {})) == RECORDED[name]["Outputs"]
