"""The worker with a processor: a zip of its own, or a container image whose recipe is staged at synth, without Docker.

Synthesized with bundling off (the recipe needs no pip: pip runs in the
image's build, at deploy); test_worker_zip.py builds the zip for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stack_under_test import HANDLERS, OCR, PROCESSOR_DIR, PROCESSOR_IMAGE, PROCESSOR_SPEC, PROCESSOR_ZIP, REPO_ROOT, STACK_NAME
from test_asset import assert_holds_the_runtime_alone

from s3wq import config
from s3wq_cdk.functions import RUNTIME

PYTHON = RUNTIME.name.removeprefix("python")
# What the two variants of one worker may differ in: how its code is packaged.
PACKAGING = {"Code", "Handler", "Runtime", "PackageType", "ImageConfig"}


def assembly(stack) -> tuple[Path, dict]:
    outdir = Path(stack.stack.node.root.outdir)
    return outdir, json.loads((outdir / f"{STACK_NAME}.assets.json").read_text())


def image_recipe(stack) -> tuple[Path, dict]:
    """The staged recipe of the worker's image in the cloud assembly, and its entry in the asset manifest."""
    outdir, manifest = assembly(stack)
    (image,) = manifest["dockerImages"].values()
    return outdir / image["source"]["directory"], image


def zip_folder(stack, kind: str) -> Path:
    """The folder of the function's zip asset in the cloud assembly."""
    outdir, manifest = assembly(stack)
    key = stack.function(kind)[1]["Properties"]["Code"]["S3Key"]
    (asset,) = [a for a in manifest["files"].values() if next(iter(a["destinations"].values()))["objectKey"] == key]
    return outdir / asset["source"]["path"]


def test_without_a_processor_folder_every_function_shares_one_zip(stack):
    keys = {stack.function(kind)[1]["Properties"]["Code"]["S3Key"] for kind in HANDLERS}
    assert len(keys) == 1


def test_the_zip_variant_ships_the_folder_with_the_worker_alone(synth):
    stack = synth(PROCESSOR_ZIP)
    worker = zip_folder(stack, "worker")
    assert (worker / "wordcount.py").read_bytes() == (PROCESSOR_DIR / "wordcount.py").read_bytes()
    assert_holds_the_runtime_alone(worker)
    # Populate and status never run a processor: they keep the zip of s3wq alone.
    shared = zip_folder(stack, "populate")
    assert zip_folder(stack, "status") == shared != worker
    assert not (shared / "wordcount.py").exists()
    assert stack.environment("worker")[config.ENV_PROCESSOR] == PROCESSOR_SPEC
    assert "PackageType" not in stack.function("worker")[1]["Properties"]


@pytest.mark.parametrize("architecture, platform", [("arm64", "linux/arm64"), ("x86_64", "linux/amd64")])
def test_the_image_variant_stages_its_recipe_without_docker(synth, architecture, platform):
    stack = synth({**PROCESSOR_IMAGE, "architecture": architecture})
    properties = stack.function("worker")[1]["Properties"]
    assert properties["PackageType"] == "Image"
    assert properties["ImageConfig"] == {"Command": [HANDLERS["worker"]]}
    assert properties["Architectures"] == [architecture]
    recipe, image = image_recipe(stack)
    assert image["source"]["platform"] == platform
    dockerfile = (recipe / "Dockerfile").read_text()
    assert f"FROM public.ecr.aws/lambda/python:{PYTHON}-{architecture}\n" in dockerfile
    assert "--only-binary=:all:" in dockerfile and '--target "${LAMBDA_TASK_ROOT}"' in dockerfile
    assert f'CMD ["{HANDLERS["worker"]}"]' in dockerfile
    assert (recipe / "requirements" / "s3wq.txt").read_bytes() == (REPO_ROOT / "requirements.txt").read_bytes()
    assert (recipe / "requirements" / "processor.txt").read_bytes() == (PROCESSOR_DIR / "requirements.txt").read_bytes()
    assert (recipe / "task" / "wordcount.py").is_file()
    assert_holds_the_runtime_alone(recipe / "task")
    # Only the worker is an image.
    for kind in ("populate", "status"):
        assert stack.function(kind)[1]["Properties"]["Runtime"] == RUNTIME.name


def test_the_worker_is_the_same_function_in_both_variants_but_for_its_packaging(synth):
    zipped, image = (synth(overrides).function("worker") for overrides in (PROCESSOR_ZIP, PROCESSOR_IMAGE))
    assert zipped[0] == image[0]  # the same logical ID: switching is an update of one function
    strip = lambda resource: {k: v for k, v in resource["Properties"].items() if k not in PACKAGING}  # noqa: E731
    assert strip(zipped[1]) == strip(image[1])
    assert zipped[1].get("DependsOn") == image[1].get("DependsOn")


def test_ocr_deploys_the_image_with_its_extra_and_sizes_the_worker_for_it(synth):
    stack = synth(OCR)
    properties = stack.function("worker")[1]["Properties"]
    assert properties["PackageType"] == "Image"
    assert properties["MemorySize"] == 1769
    assert stack.environment("populate")[config.ENV_GROUP_SIZE] == "5"
    assert stack.environment("worker")[config.ENV_PROCESSOR] == "ocr"
    recipe, _ = image_recipe(stack)
    assert (recipe / "requirements" / "processor.txt").read_bytes() == (REPO_ROOT / "requirements-ocr.txt").read_bytes()
    assert (recipe / "task" / "s3wq" / "processors" / "ocr").is_dir()
    assert_holds_the_runtime_alone(recipe / "task")


def test_what_the_user_sets_wins_over_the_processors_choice(synth):
    stack = synth({**OCR, "workerMemoryMb": 3008, "groupSize": 2})
    assert stack.function("worker")[1]["Properties"]["MemorySize"] == 3008
    assert stack.environment("populate")[config.ENV_GROUP_SIZE] == "2"


def test_ocr_mode_and_languages_reach_the_worker_alone(synth):
    stack = synth({**OCR, "ocrMode": "force", "ocrLang": "en,ru"})
    worker = stack.environment("worker")
    assert (worker["S3WQ_OCR_MODE"], worker["S3WQ_OCR_LANG"]) == ("force", "en,ru")
    assert "S3WQ_OCR_MODE" not in stack.environment("populate")
    assert "S3WQ_OCR_MODE" not in synth(OCR).environment("worker")  # unset: the processor's own default
