"""A processor folder is checked before anything is built: what ships, and every line or link that must not.

Pure file-system tests of infra/processor_source.py (no CDK, no pip): the
synth (processorDir) and the local cloud (--processor-dir) both rely on it.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3wq_cdk.processor_source import ProcessorSource, ProcessorSourceError


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "myproc"
    (root / "helpers").mkdir(parents=True)
    (root / "mymod.py").write_text("def process(group, ctx):\n    pass\n")
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "shapes.py").write_text("SIDES = 4\n")
    return root


def opened(root, requirements: str | None = None, spec: str = "mymod:process") -> ProcessorSource:
    if requirements is not None:
        (root / "requirements.txt").write_text(requirements)
    return ProcessorSource.open(root, spec=spec)


def test_the_modules_ship_and_caches_environments_and_hidden_files_do_not(folder):
    for hidden in (".env", ".aws/credentials", ".ssh/id_rsa", ".git/config", "__pycache__/mymod.cpython-311.pyc", ".venv/lib/x.py"):
        (folder / hidden).parent.mkdir(parents=True, exist_ok=True)
        (folder / hidden).write_text("secret\n")
    (folder / "helpers" / "old.pyc").write_bytes(b"\0")

    shipped = {path.as_posix() for path in opened(folder, "attrs==25.4.0\n").files()}

    assert shipped == {"mymod.py", "helpers/__init__.py", "helpers/shapes.py", "requirements.txt"}


@pytest.mark.parametrize(
    "line",
    [
        "attrs==25.4.0",
        "attrs>=25,<26",
        "requests[socks]==2.32.3",
        'tomli==2.0.1 ; python_version < "3.11"',
        "humanize",
    ],
)
def test_a_plain_requirement_is_accepted(folder, line):
    assert opened(folder, f"# pinned\n\n{line}  # why\n").requirement_lines() == [line]


@pytest.mark.parametrize(
    "line",
    [
        "-r other.txt",
        "-c constraints.txt",
        "-e .",
        "./wheels/mine-1.0-py3-none-any.whl",
        "/abs/mine.whl",
        "./pkg",
        "foo/bar",
        "mine @ https://example.com/mine-1.0-py3-none-any.whl",
        "mine @ file:///abs/mine.whl",
        "attrs==25.4.0 --hash=sha256:0123abcd",
        "--index-url https://example.com/simple",
        "attrs==${ATTRS_VERSION}",
        "qux>=1 ; python_version > '${AWS_SECRET_ACCESS_KEY}'",
    ],
)
def test_a_line_pip_would_fetch_from_elsewhere_or_expand_is_refused_naming_it(folder, line):
    with pytest.raises(ProcessorSourceError, match=r"^requirements\.txt:2: ") as refused:
        opened(folder, f"attrs==25.4.0\n{line}\n")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "line",
    [
        "evil-1.0-py3-none-any.whl",
        "evil-1.0-py3-none-any.whl ; python_version > '3'",
        "pkg.tar.gz",
        "pkg.zip",
        "pkg.tgz",
        "pkg.tar.gz[extra]",
    ],
)
def test_a_line_that_is_a_file_name_is_refused(folder, line):
    """A valid PEP 508 name, but pip installs a line ending like an archive as that file, from the build's working directory."""
    with pytest.raises(ProcessorSourceError, match=r"^requirements\.txt:1: .* is not a plain requirement .*files, paths"):
        opened(folder, f"{line}\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=30), st.sampled_from(["${", "@", " --", " -r "]))
def test_no_line_with_a_variable_a_direct_reference_or_an_option_is_accepted(text, danger):
    """Wherever in a line it comes, ${, @ or an option means the line never reaches pip."""
    line = f"attrs=={text[: len(text) // 2]}{danger}{text[len(text) // 2 :]}".split("#", 1)[0].strip()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "mymod.py").write_text("")
        (root / "requirements.txt").write_text(line + "\n", encoding="utf-8")
        try:
            accepted = ProcessorSource.open(root, spec="mymod:process").requirement_lines()
        except ProcessorSourceError:
            return
    assert not any(danger.strip() in kept for kept in accepted), line


def test_a_link_out_of_the_folder_is_refused(folder, tmp_path):
    (tmp_path / "elsewhere.py").write_text("X = 1\n")
    os.symlink(tmp_path / "elsewhere.py", folder / "elsewhere.py")

    with pytest.raises(ProcessorSourceError, match=r"elsewhere\.py links outside the folder"):
        opened(folder)


def test_a_link_to_a_folder_inside_is_refused_rather_than_left_out(folder):
    os.symlink(folder / "helpers", folder / "lib")

    with pytest.raises(ProcessorSourceError, match=r"lib links to a folder"):
        opened(folder)


def test_a_link_to_a_file_inside_ships_its_content(folder):
    os.symlink(folder / "helpers" / "shapes.py", folder / "shapes.py")

    assert "shapes.py" in {path.as_posix() for path in opened(folder).files()}


@pytest.mark.parametrize("target", [".env", ".aws/credentials", "node_modules/pkg/index.js", "__pycache__/mymod.cpython-311.pyc"])
def test_a_link_to_a_file_that_does_not_ship_is_refused(folder, target):
    """settings.txt -> .env would ship the hidden file's content under a name that is not hidden."""
    (folder / target).parent.mkdir(parents=True, exist_ok=True)
    (folder / target).write_text("AWS_SECRET_ACCESS_KEY=...\n")
    os.symlink(folder / target, folder / "settings.txt")

    with pytest.raises(ProcessorSourceError, match=rf"^processorDir '.*': settings\.txt links to {re.escape(target)}, which does not ship"):
        opened(folder)


def test_a_hard_link_is_refused_unless_every_name_of_the_file_ships(folder, tmp_path):
    os.link(folder / "helpers" / "shapes.py", folder / "shapes.py")  # both names ship: the same file twice
    assert {"shapes.py", "helpers/shapes.py"} <= {path.as_posix() for path in opened(folder).files()}

    (tmp_path / "outside.txt").write_text("not in the folder\n")
    os.link(tmp_path / "outside.txt", folder / "notes.txt")
    with pytest.raises(ProcessorSourceError, match=r"^processorDir '.*': notes\.txt is hard-linked to a name outside the folder or hidden"):
        opened(folder)


def test_a_hard_link_to_a_hidden_file_of_the_folder_is_refused(folder):
    (folder / ".env").write_text("AWS_SECRET_ACCESS_KEY=...\n")
    os.link(folder / ".env", folder / "settings.txt")

    with pytest.raises(ProcessorSourceError, match=r"settings\.txt is hard-linked .* \(2 links, 1 shipped\)"):
        opened(folder)


@pytest.mark.parametrize("name", ["sitecustomize.py", "usercustomize.py", "extra.pth", "helpers/nested.pth", "helpers/sitecustomize.py"])
def test_a_start_up_hook_is_refused(folder, name):
    """Python runs them at start-up: under `s3wq work` the folder is on the processor host's PYTHONPATH."""
    (folder / name).write_text("import os; os.system('echo ran')\n")

    with pytest.raises(ProcessorSourceError, match=rf"^processorDir '.*': {re.escape(name)} is a start-up hook"):
        opened(folder)


# What the worker's asset holds beside the folder: s3wq's pins (requirements.txt) and what they require, as installed.
PINNED_MODULES = [
    "boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six", "zstandard",
    "aws_lambda_powertools", "typing_extensions", "pypdf", "aws_xray_sdk", "wrapt",
]  # fmt: skip


@pytest.mark.parametrize("module", PINNED_MODULES)
@pytest.mark.parametrize("as_package", [True, False])
def test_a_module_named_like_one_s3wq_needs_is_refused(folder, module, as_package):
    """At the asset's root it would replace the pinned one (a folder of that name would merge into it)."""
    entry = folder / (f"{module}/__init__.py" if as_package else f"{module}.py")
    entry.parent.mkdir(exist_ok=True)
    entry.write_text("")

    shown = f"{module}/" if as_package else f"{module}.py"
    with pytest.raises(ProcessorSourceError, match=rf"^processorDir '.*': {re.escape(shown)} would shadow {module}\b.*which s3wq needs"):
        opened(folder)


@pytest.mark.parametrize("name", ["queue.py", "types.py", "email/__init__.py", "_socket.cpython-311-x86_64-linux-gnu.so"])
def test_a_module_named_like_the_standard_librarys_is_refused(folder, name):
    (folder / name).parent.mkdir(exist_ok=True)
    (folder / name).write_text("")
    top = name.split("/")[0].split(".")[0]

    with pytest.raises(ProcessorSourceError, match=rf"would shadow the standard library's {top}; rename it"):
        opened(folder)


def test_a_folder_of_data_named_like_the_standard_librarys_ships_but_a_package_does_not(folder):
    """html/ of templates hides no module (import prefers a regular one); html/__init__.py would."""
    (folder / "html").mkdir()
    (folder / "html" / "page.html").write_text("<p></p>\n")
    assert "html/page.html" in {path.as_posix() for path in opened(folder).files()}

    (folder / "html" / "__init__.py").write_text("")
    with pytest.raises(ProcessorSourceError, match=r"html/ would shadow the standard library's html"):
        opened(folder)


def test_a_module_named_like_a_requirement_of_the_folder_is_refused(folder):
    """Installed at the same root, the requirement and the module would collide."""
    (folder / "humanize.py").write_text("")

    with pytest.raises(ProcessorSourceError, match=r"humanize\.py would shadow humanize, a requirement of the folder"):
        opened(folder, "humanize==4.12.3\n")


def test_copying_hides_nothing_the_asset_already_holds(folder, tmp_path):
    """What pip installed for the asset's platform is known only then: a folder module named like one is refused, not copied over it."""
    target = tmp_path / "asset"
    (target / "wordy").mkdir(parents=True)
    (target / "wordy" / "__init__.py").write_text("PINNED = True\n")
    (folder / "wordy.py").write_text("")
    source = opened(folder)

    with pytest.raises(ProcessorSourceError, match=r"wordy\.py would collide with wordy, which the asset already holds"):
        source.copy_into(target)
    assert sorted(path.name for path in target.rglob("*")) == ["__init__.py", "wordy"]


@pytest.mark.parametrize(
    ("setup", "spec", "message"),
    [
        (lambda root: None, "other:process", r"holds no module 'other'"),
        (lambda root: (root / "s3wq.py").write_text(""), "mymod:process", r"would shadow s3wq"),
        (lambda root: None, "text", r"must be module:function"),
    ],
)
def test_a_folder_that_cannot_serve_the_processor_is_refused_in_one_line(folder, setup, spec, message):
    setup(folder)
    with pytest.raises(ProcessorSourceError, match=message):
        opened(folder, spec=spec)


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(ProcessorSourceError, match=r"is not a folder"):
        ProcessorSource.open(tmp_path / "nowhere", spec="mymod:process")
