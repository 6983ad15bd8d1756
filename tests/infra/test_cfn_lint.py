"""cfn-lint on the synthesized templates: warnings are allowed, errors are not."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint_file
from stack_under_test import VARIANTS, WORKER_VARIANTS


@pytest.mark.parametrize("overrides", [*VARIANTS.values(), *WORKER_VARIANTS.values()], ids=[*VARIANTS, *WORKER_VARIANTS])
def test_template_has_no_cfn_lint_errors(synth, overrides, tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps(synth(overrides).json, indent=1))
    matches = lint_file(path, config=ManualArgs(regions=["us-east-1"]))
    errors = [f"{match.rule.id} {'/'.join(map(str, match.path))}: {match.message}" for match in matches if match.rule.severity == "error"]
    assert errors == []
