"""S3wqQueue's props (DeploySettings), checked in one place: a bad one stops the synth with one line naming it, before anything is built."""

from __future__ import annotations

import dataclasses
from dataclasses import fields

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks
from stack_under_test import PROCESSOR_DIR, PROCESSOR_SPEC

from s3wq_cdk import DeploySettings, S3wqQueue
from s3wq_cdk.errors import SettingsError
from s3wq_cdk.settings import CONTEXT_KEYS, DEFAULT_GROUP_SIZE, DEFAULT_WORKER_MEMORY_MB, PROCESSOR_PROFILES


def queue(settings: DeploySettings, **kwargs) -> S3wqQueue:
    return S3wqQueue(cdk.Stack(cdk.App(), "Props"), "Queue", settings=settings, **kwargs)


@pytest.mark.parametrize(
    "props, problem",
    [
        ({"processor": PROCESSOR_SPEC, "processor_dir": str(PROCESSOR_DIR / "nowhere")}, r"processorDir '.*nowhere' is not a folder"),
        ({"processor": "absent:process", "processor_dir": str(PROCESSOR_DIR)}, r"holds no module 'absent'"),
        ({"processor": "text", "processor_dir": str(PROCESSOR_DIR)}, r"processor 'text' must be module:function when processorDir is set"),
        ({"processor": "ocr", "processor_dir": str(PROCESSOR_DIR)}, r"processor 'ocr' is built in: processorDir is for a module:function"),
        ({"worker_image": True}, r"workerImage: the built-in processor 'text' runs from the zip"),
        ({"worker_memory_mb": 64}, r"workerMemoryMb must be between 128 and 10240"),
    ],
    ids=["no-folder", "module-missing", "builtin-with-folder", "ocr-with-folder", "image-for-text", "memory"],
)
def test_a_bad_prop_stops_the_construct_in_one_line(props, problem):
    with pytest.raises(ValueError, match=problem) as caught:
        queue(DeploySettings(bundling=False, **props))
    assert "\n" not in str(caught.value)


def test_context_keys_reach_the_same_checks():
    context = {"processor": PROCESSOR_SPEC, "processorDir": str(PROCESSOR_DIR / "nowhere")}
    with pytest.raises(ValueError, match="is not a folder"):
        DeploySettings.from_context(cdk.App(context=context))
    assert DeploySettings.from_context(cdk.App(context={"workerImage": "true", "processor": "ocr"})).worker_image is True


def test_a_bucket_and_a_bucket_name_are_one_too_many():
    stack = cdk.Stack(cdk.App(), "Props")
    bucket = s3.Bucket(stack, "Data")
    with pytest.raises(ValueError, match=r"give bucket or settings\.bucket_name, not both"):
        S3wqQueue(stack, "Queue", settings=DeploySettings(bundling=False, bucket_name="other-bucket"), bucket=bucket)


def test_one_queue_per_stack():
    stack = cdk.Stack(cdk.App(), "Props")
    S3wqQueue(stack, "First", settings=DeploySettings(bundling=False))
    with pytest.raises(ValueError, match=r"one per stack .* Props/First is already in this one"):
        S3wqQueue(stack, "Second", settings=DeploySettings(bundling=False, workspace_prefix="other"))


@pytest.mark.parametrize(
    "props, memory, group_size",
    [
        ({}, DEFAULT_WORKER_MEMORY_MB, DEFAULT_GROUP_SIZE),
        ({"processor": "ocr"}, PROCESSOR_PROFILES["ocr"].worker_memory_mb, PROCESSOR_PROFILES["ocr"].group_size),
        ({"processor": "ocr", "worker_memory_mb": 4096, "group_size": 1}, 4096, 1),
    ],
    ids=["text", "ocr", "ocr-set-by-the-user"],
)
def test_the_processor_chooses_what_the_user_left_unset(props, memory, group_size):
    settings = DeploySettings(**props)
    assert (settings.effective_worker_memory_mb, settings.effective_group_size) == (memory, group_size)


def test_ocr_fits_one_group_well_inside_an_invocation():
    """The profile's arithmetic (infra/settings.py): a group of 20-page scans at 2.4 s a page takes at most a third of 890 s."""
    profile = PROCESSOR_PROFILES["ocr"]
    assert profile.group_size * 20 * 2.4 <= 890 / 3
    assert profile.worker_memory_mb == 1769  # one vCPU; peak RSS ~1.2 GB fits


def test_the_users_bucket_holds_the_workspace_and_the_queue_has_no_nag_finding(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Mine")
    bucket = s3.Bucket(stack, "Data", enforce_ssl=True)
    built = S3wqQueue(stack, "Queue", settings=DeploySettings(bundling=False), bucket=bucket)
    cdk.Aspects.of(app).add(AwsSolutionsChecks())
    assert built.storage.bucket is bucket and not built.storage.created
    template = Template.from_stack(stack)
    assert len(template.find_resources("AWS::S3::Bucket")) == 1
    # The outputs keep the plain keys `s3wq start --stack Mine` reads.
    assert {"StateMachineArn", "WorkspaceUri", "BucketName"} <= set(template.to_json()["Outputs"])
    # The grants on the user's bucket (its logical ID is the user's) are suppressed as on the stack's own; the bucket's findings are the user's.
    annotations = Annotations.from_stack(stack)
    findings = [
        *annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")),
        *annotations.find_warning("*", Match.any_value()),
    ]
    assert [f"{m.id}: {m.entry.data}" for m in findings if m.id.startswith("/Mine/Queue/")] == []


def test_from_context_takes_the_apps_values_and_a_context_key_overrides_them():
    settings = DeploySettings.from_context(cdk.App(context={"maxWorkers": "300"}), max_workers=200, default_workers=20, processor="ocr")
    assert (settings.max_workers, settings.default_workers, settings.processor, settings.effective_group_size) == (300, 20, "ocr", 5)
    # A bad -c value over a good one of the app's is the -c value's problem, named by its key.
    with pytest.raises(SettingsError, match=r"^maxWorkers must be between 1 and 10000, got 20000$"):
        DeploySettings.from_context(cdk.App(context={"maxWorkers": "20000"}), max_workers=200)


@pytest.mark.parametrize(
    "props, context, expected",
    [
        # The app: its own processor in its folder; -c processor=ocr means the built-in, without the folder.
        ({"processor": PROCESSOR_SPEC, "processor_dir": str(PROCESSOR_DIR), "worker_image": True}, {"processor": "ocr"}, ("ocr", None)),
        ({"processor": PROCESSOR_SPEC, "processor_dir": str(PROCESSOR_DIR)}, {"processor": "text"}, ("text", None)),
        # Another function of the same folder keeps it; a -c processorDir is the folder, whatever the code said.
        (
            {"processor": "other:fn", "processor_dir": str(PROCESSOR_DIR)},
            {"processor": PROCESSOR_SPEC},
            (PROCESSOR_SPEC, str(PROCESSOR_DIR)),
        ),
        (
            {"processor": "mymod:fn", "processor_dir": "myproc"},
            {"processorDir": str(PROCESSOR_DIR), "processor": PROCESSOR_SPEC},
            (PROCESSOR_SPEC, str(PROCESSOR_DIR)),
        ),
        # ocr's own settings go with ocr.
        ({"processor": "ocr", "ocr_lang": "en,ru", "ocr_mode": "force"}, {"processor": "text"}, ("text", None)),
    ],
    ids=["ocr-over-a-folder", "text-over-a-folder", "same-folder", "context-folder", "text-over-ocr-settings"],
)
def test_a_context_processor_takes_the_apps_processor_with_what_came_with_it(props, context, expected):
    """What the app's code set for its own processor does not apply to one that context names; a -c setting always does."""
    settings = DeploySettings.from_context(cdk.App(context={"bundling": False, **context}), **props)
    assert (settings.processor, settings.processor_dir) == expected
    if settings.processor == "text":
        assert (settings.worker_image, settings.ocr_lang, settings.ocr_mode) == (False, None, None)


def test_a_context_processor_keeps_the_apps_model_for_the_other_vlm_processor():
    props = {"processor": "vlm", "vlm_endpoint": "https://models.example.com/v1", "vlm_in_flight": 8}
    auto = DeploySettings.from_context(cdk.App(context={"processor": "auto"}), **props)
    assert (auto.processor, auto.vlm_endpoint, auto.vlm_in_flight) == ("auto", props["vlm_endpoint"], 8)
    assert DeploySettings.from_context(cdk.App(context={"processor": "text"}), **props).vlm_endpoint is None
    # The app's own mismatch is still the app's to fix: nothing is dropped unless context names the processor.
    with pytest.raises(SettingsError, match=r"^vlmEndpoint, vlmInFlight are the vlm and auto processors' settings; processor is 'text'$"):
        DeploySettings.from_context(cdk.App(), **{**props, "processor": "text"})


# A -c value of each parser's kind, and what it reads as.
_RAW_BY_PARSER = {"int": "7", "float": "7.5", "str": "x", "boolean": "true", "string_list": '["a"]', "id_list": "a,b"}


def _raw_context_value(key: str) -> str:
    _, parse = CONTEXT_KEYS[key]
    return {"workspacePrefix": "p", "inputBuckets": "in-bucket/p"}.get(key) or _RAW_BY_PARSER[getattr(parse, "__name__", "")]


@pytest.mark.parametrize("key", sorted(CONTEXT_KEYS))
def test_every_context_key_overrides_the_apps_value(key, monkeypatch):
    """As the docs say, for every setting: the app's code sets it, -c sets it too, and -c wins (checks apart: validate is a no-op)."""
    name, parse = CONTEXT_KEYS[key]
    raw = _raw_context_value(key)
    monkeypatch.setattr(DeploySettings, "validate", lambda self: None)
    apps_value = object()
    settings = DeploySettings.from_context(cdk.App(context={key: raw}), **{name: apps_value})
    assert getattr(settings, name) == parse(raw) and getattr(settings, name) is not apps_value


def test_every_context_key_sets_a_field():
    names = {field.name for field in fields(DeploySettings)}
    assert {name for name, _ in CONTEXT_KEYS.values()} == names


def test_replacing_the_processor_of_settings_gets_the_new_processors_sizes():
    """dataclasses.replace keeps "not set" unset, so the new processor's profile applies (it did not when sizes were filled in)."""
    ocr = dataclasses.replace(DeploySettings(), processor="ocr")
    assert (ocr.effective_worker_memory_mb, ocr.effective_group_size) == (
        PROCESSOR_PROFILES["ocr"].worker_memory_mb,
        PROCESSOR_PROFILES["ocr"].group_size,
    )
    assert dataclasses.replace(ocr, processor="text").effective_group_size == DEFAULT_GROUP_SIZE
