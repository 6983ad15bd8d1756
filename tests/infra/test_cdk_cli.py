"""`npx cdk synth` from the repository root, as a user runs it: cdk.json's context, bundling on.

The cloud assembly goes to a temporary directory, so the repository's
cdk.out is left alone. Bundling runs pip for Lambda's platform (about ten
seconds); the Lambda asset it builds is checked here for what it must and
must not ship.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from stack_under_test import HANDLERS, REPO_ROOT, STACK_NAME
from test_asset import assert_holds_the_runtime_alone

MAX_ZIPPED_ASSET_BYTES = 15 * 1000 * 1000
ARCHITECTURE_TAGS = {"arm64": "aarch64", "x86_64": "x86_64"}
INSTALL_HINT = "run `make install` (it installs the CDK CLI pinned in package.json into node_modules/; CI runs `make test`, which does)"


@dataclass
class CliSynth:
    problem: str | None = None
    outdir: Path | None = None
    output: str = ""

    def ok(self) -> CliSynth:
        if self.problem:
            pytest.fail(self.problem, pytrace=False)
        return self

    @property
    def template(self) -> dict:
        return json.loads((self.outdir / f"{STACK_NAME}.template.json").read_text())

    def lambda_asset(self) -> tuple[Path, str]:
        """The Lambda code asset: its directory in the assembly and its object key in the asset bucket."""
        manifest = json.loads((self.outdir / f"{STACK_NAME}.assets.json").read_text())
        zips = [asset for asset in manifest["files"].values() if asset["source"]["packaging"] == "zip"]
        assert len(zips) == 1, f"expected one zip asset, found {[asset['displayName'] for asset in zips]}"
        (asset,) = zips
        (destination,) = asset["destinations"].values()
        return self.outdir / asset["source"]["path"], destination["objectKey"]


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> CliSynth:
    npx = shutil.which("npx")
    if npx is None:
        return CliSynth(problem=f"npx is not on PATH (Node.js is needed to run the CDK CLI): {INSTALL_HINT}")
    if not (REPO_ROOT / "node_modules" / ".bin" / "cdk").exists():
        # Without it npx would fetch whatever `cdk` the registry has today.
        return CliSynth(problem=f"the CDK CLI is not installed in node_modules/: {INSTALL_HINT}")
    outdir = tmp_path_factory.mktemp("cdk-out")
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        # Keep the run offline apart from pip: no notices, telemetry or version check.
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "CDK_DISABLE_VERSION_CHECK": "true",
    }
    process = subprocess.run(
        [npx, "cdk", "synth", "--quiet", "--no-notices", "--output", str(outdir)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = f"exit {process.returncode}\n--- stdout\n{process.stdout[-4000:]}\n--- stderr\n{process.stderr[-4000:]}"
    if process.returncode != 0:
        return CliSynth(problem=f"`npx cdk synth` failed:\n{output}", outdir=outdir, output=output)
    return CliSynth(outdir=outdir, output=output)


def test_synth_writes_the_template(cli):
    cli.ok()
    assert (cli.outdir / f"{STACK_NAME}.template.json").is_file(), cli.output


def test_asset_ships_the_handlers_and_their_dependencies(cli):
    asset, _ = cli.ok().lambda_asset()
    for required in ("s3wq", "s3wq/handlers", "pypdf", "zstandard", "botocore/data/s3"):
        assert (asset / required).is_dir(), f"{required}/ is missing from the Lambda asset"
    for module in HANDLERS.values():
        assert (asset / (module.rsplit(".", 1)[0].replace(".", "/") + ".py")).is_file()
    # botocore's models of services the handlers never call are pruned.
    assert not (asset / "botocore" / "data" / "ec2").exists()


def test_the_asset_holds_the_runtime_alone(cli):
    """What `cdk deploy` would upload: every module a handler imports, nothing of the CLI or the dev tools."""
    asset, _ = cli.ok().lambda_asset()
    assert_holds_the_runtime_alone(asset)


def test_native_extensions_match_the_functions_runtime_and_architecture(cli):
    asset, _ = cli.ok().lambda_asset()
    functions = [r["Properties"] for r in cli.template["Resources"].values() if r["Properties"].get("Handler") in HANDLERS.values()]
    assert len(functions) == len(HANDLERS)
    runtimes = {f["Runtime"] for f in functions}
    architectures = {architecture for f in functions for architecture in f["Architectures"]}
    assert len(runtimes) == 1 and len(architectures) == 1
    python_tag = "cpython-" + runtimes.pop().removeprefix("python").replace(".", "")
    machine = ARCHITECTURE_TAGS[architectures.pop()]
    extensions = [path.name for path in asset.rglob("*.so")]
    assert extensions, "no native extension found (zstandard ships one)"
    wrong = [name for name in extensions if not ((python_tag in name or ".abi3." in name) and machine in name)]
    assert not wrong, f"built for another Python or machine than {python_tag}/{machine}: {wrong}"


def test_zipped_asset_is_under_15_mb(cli, tmp_path):
    asset, _ = cli.ok().lambda_asset()
    archive = Path(shutil.make_archive(str(tmp_path / "asset"), "zip", root_dir=asset))
    size = archive.stat().st_size
    print(f"zipped Lambda asset: {size / 1e6:.1f} MB ({size} bytes)")
    assert size < MAX_ZIPPED_ASSET_BYTES, f"zipped Lambda asset is {size / 1e6:.1f} MB"


def test_every_function_ships_the_bundled_asset(cli):
    _, object_key = cli.ok().lambda_asset()
    for resource in cli.template["Resources"].values():
        if resource["Type"] == "AWS::Lambda::Function" and resource["Properties"].get("Handler") in HANDLERS.values():
            assert resource["Properties"]["Code"]["S3Key"] == object_key


def test_nag_report_has_no_non_compliant_rule(cli):
    reports = list(cli.ok().outdir.glob("AwsSolutions-*NagReport.csv"))
    assert len(reports) == 1, f"expected one AwsSolutions report, found {reports}"
    (report,) = reports
    with report.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows
    assert [(row["Rule ID"], row["Resource ID"]) for row in rows if row["Compliance"] == "Non-Compliant"] == []


def _comparable(template: dict) -> dict:
    """The resources, without what depends on how the asset was built or who synthesized."""
    resources = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CDK::Metadata":
            continue
        resource = {key: value for key, value in resource.items() if key != "Metadata"}
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"] = {key: value for key, value in resource["Properties"].items() if key != "Code"}
        resources[logical_id] = resource
    return resources


def test_tests_see_the_template_the_cli_synthesizes(cli, stack):
    """The in-process stack of this tier (no bundling) is the one `cdk synth` makes, but for the code asset."""
    assert _comparable(cli.ok().template) == _comparable(stack.json)


def test_the_cli_runs_on_the_pinned_node_lts_not_the_machines():
    """Node 20 is past its end of life: package.json pins Node 22 LTS, which make puts first on PATH for the CDK CLI and jsii."""
    package = json.loads((REPO_ROOT / "package.json").read_text())
    assert package["engines"]["node"] == ">=22"
    assert package["devDependencies"]["node"].startswith("22.")
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/node"]["version"] == package["devDependencies"]["node"]
    assert "export PATH := $(CURDIR)/node_modules/.bin:$(PATH)" in (REPO_ROOT / "Makefile").read_text()
    pinned = REPO_ROOT / "node_modules" / ".bin" / "node"
    if not pinned.exists():
        pytest.fail(INSTALL_HINT, pytrace=False)
    version = subprocess.run([str(pinned), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{package['devDependencies']['node']}"
