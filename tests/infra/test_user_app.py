"""A user's own CDK app, exactly as docs/deploy.md shows it, synthesized outside the repository without Docker.

The app is copied from the doc (the python block after ``<!-- user-app -->``)
into a temporary folder with a processor folder beside it, and run with this
venv's python as the CDK CLI runs an app (CDK_OUTDIR, CDK_CONTEXT_JSON).
``s3wq_cdk`` is infra/s3wq_cdk, found by pyproject's packages.find (which
``pip install -e`` turns into a finder mapping the name to the folder); here
a link of that name on PYTHONPATH does the same, so the test needs no
install (tests/e2e/test_wheel.py installs the wheel). Bundling is off (``-c bundling=false``): the asset's build is
test_worker_zip.py's.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
import setuptools
from stack_under_test import HANDLERS, PROCESSOR_DIR, REPO_ROOT

from s3wq import config

DOC = REPO_ROOT / "docs" / "deploy.md"
STACK = "Scans"


def documented_app() -> str:
    text = DOC.read_text()
    match = re.search(r"<!-- user-app -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"no python block after <!-- user-app --> in {DOC.name}"
    return match.group(1)


def run_user_app(tmp_path, context: dict) -> subprocess.CompletedProcess:
    """The documented app, run as the CDK CLI runs it (``python app.py``, its context in CDK_CONTEXT_JSON)."""
    (tmp_path / "app.py").write_text(documented_app())
    shutil.copytree(PROCESSOR_DIR, tmp_path / "myproc")
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "s3wq_cdk").symlink_to(REPO_ROOT / "infra" / "s3wq_cdk", target_is_directory=True)
    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "path"), str(REPO_ROOT / "lambdas")]),
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    }
    return subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def synth_user_app(tmp_path, context: dict) -> dict:
    process = run_user_app(tmp_path, context)
    assert process.returncode == 0, process.stderr[-3000:]
    outdir = tmp_path / "cdk.out"
    return {"template": json.loads((outdir / f"{STACK}.template.json").read_text()), "outdir": outdir}


def test_the_documented_app_synthesizes_a_queue_with_the_processor(tmp_path):
    """One run (a CDK app's synth takes seconds): the zip, as the doc's app deploys it; the image variant is test_worker_variants.py's."""
    synthesized = synth_user_app(tmp_path, {"bundling": False})
    template, outdir = synthesized["template"], synthesized["outdir"]
    functions = {
        p["Handler"]: p
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "s3wq" in (p := r["Properties"]).get("Description", "")
    }
    assert sorted(functions) == sorted(HANDLERS.values())
    worker = functions[HANDLERS["worker"]]
    assert worker["Environment"]["Variables"][config.ENV_PROCESSOR] == "wordcount:process_group"
    assert "PackageType" not in worker
    assert template["Outputs"]["MaxWorkers"]["Value"] == "200"
    assets = json.loads((outdir / f"{STACK}.assets.json").read_text())
    (folder,) = [a for a in assets["files"].values() if next(iter(a["destinations"].values()))["objectKey"] == worker["Code"]["S3Key"]]
    assert (outdir / folder["source"]["path"] / "wordcount.py").is_file()
    (report,) = outdir.glob("AwsSolutions-*NagReport.csv")
    with report.open(newline="") as handle:
        assert [(row["Rule ID"], row["Resource ID"]) for row in csv.DictReader(handle) if row["Compliance"] == "Non-Compliant"] == []


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"maxWorkers": "20000"}, "s3wq: error: maxWorkers must be between 1 and 10000, got 20000"),
        ({"processorDir": "nowhere"}, "s3wq: error: processorDir 'nowhere' is not a folder"),
    ],
    ids=["setting", "processor-folder"],
)
def test_a_bad_setting_stops_the_users_own_app_in_one_line(tmp_path, context, problem):
    """As in this repository's app: the app does not catch it, and the construct's error is still one line, not a traceback."""
    process = run_user_app(tmp_path, {"bundling": False, **context})
    assert process.returncode != 0
    assert "Traceback" not in process.stderr
    assert process.stderr.strip() == problem, process.stderr[-3000:]


def test_the_one_line_hook_leaves_every_other_error_its_traceback():
    """Installed twice (from_context, then the construct), it still prints once; an app's own bug keeps its traceback."""
    script = (
        "import sys\n"
        "from s3wq_cdk.errors import SettingsError, tell_in_one_line\n"
        "tell_in_one_line(); tell_in_one_line()\n"
        "if sys.argv[1] == 'setting':\n"
        "    raise SettingsError('maxWorkers must be between 1 and 10000,\\n got 20000')\n"
        "raise KeyError('the app')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "infra"), str(REPO_ROOT / "lambdas")])}
    ran = {
        arg: subprocess.run([sys.executable, "-c", script, arg], env=env, capture_output=True, text=True, timeout=60)
        for arg in ("setting", "bug")
    }
    assert (ran["setting"].returncode, ran["setting"].stderr) == (1, "s3wq: error: maxWorkers must be between 1 and 10000, got 20000\n")
    assert ran["bug"].returncode == 1 and "Traceback" in ran["bug"].stderr and "KeyError: 'the app'" in ran["bug"].stderr


def test_the_documented_app_is_about_ten_lines():
    lines = [line for line in documented_app().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) <= 12


def test_pyproject_finds_every_package_of_both_source_folders():
    """Each source folder holds its package under its real name, and setuptools' find ships every package in it.

    A folder of modules without an ``__init__.py`` would be left out (namespaces off), so it fails here.
    """
    find = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["where"] == ["lambdas", "infra"]
    found = {package for where in find["where"] for package in setuptools.find_packages(str(REPO_ROOT / where), include=find["include"])}
    on_disk = {
        module.parent.relative_to(REPO_ROOT / where).as_posix().replace("/", ".")
        for where, package in (("lambdas", "s3wq"), ("infra", "s3wq_cdk"))
        for module in (REPO_ROOT / where / package).rglob("*.py")
    }
    assert {"s3wq", "s3wq_cdk"} <= found
    assert found == on_disk, "every folder of modules is a package (give it an __init__.py)"
