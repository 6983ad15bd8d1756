"""A processor folder is checked before anything is built: what ships, and every line or link that must not.

Pure file-system tests of infra/processor_source.py (no CDK, no pip): the
synth (processorDir) and the local cloud (--processor-dir) both rely on it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.processor_source import ProcessorSource, ProcessorSourceError


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
