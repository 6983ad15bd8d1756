"""cfn-lint on the synthesized templates: warnings are allowed, errors are not."""

from __future__ import annotations

import pytest
from stack_under_test import VARIANTS, WORKER_VARIANTS, cfn_lint_errors


@pytest.mark.parametrize("overrides", [*VARIANTS.values(), *WORKER_VARIANTS.values()], ids=[*VARIANTS, *WORKER_VARIANTS])
def test_template_has_no_cfn_lint_errors(synth, overrides, tmp_path):
    assert cfn_lint_errors(synth(overrides), tmp_path) == []
