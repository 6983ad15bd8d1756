"""The asset is built from wheels only: a requirement with no wheel for Lambda's platform is named, with that rule.

pip runs offline here (``PIP_NO_INDEX``), on a ``--find-links`` folder the
test fills: the sdist of a package that has no wheel, and a wheel of one
that has, so the error must tell the two apart.
"""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from s3wq_cdk.asset_files import AssetBuildError, install_requirements

METADATA = "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"


def sdist(links, name):
    """``name-1.0.tar.gz``: what a package published only as source has on an index."""
    with tarfile.open(links / f"{name.replace('-', '_')}-1.0.tar.gz", "w:gz") as archive:
        data = METADATA.format(name=name).encode()
        info = tarfile.TarInfo(f"{name.replace('-', '_')}-1.0/PKG-INFO")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))


def wheel(links, name):
    """A pure-Python wheel, ``name-1.0-py3-none-any.whl``: pip installs it for any platform."""
    module = name.replace("-", "_")
    info = f"{module}-1.0.dist-info"
    files = {
        f"{module}/__init__.py": "",
        f"{info}/METADATA": METADATA.format(name=name),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(links / f"{module}-1.0-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def test_a_requirement_without_a_wheel_is_named_and_the_build_says_it_takes_wheels_only(tmp_path, monkeypatch, capfd):
    links = tmp_path / "links"
    links.mkdir()
    sdist(links, "s3wq-test-source-only")
    wheel(links, "s3wq-test-wheeled")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("s3wq-test-wheeled==1.0\ns3wq-test-source-only==1.0\n", encoding="utf-8")

    with pytest.raises(AssetBuildError) as failed:
        install_requirements(tmp_path / "asset", [requirements], architecture="arm64", python_version="3.14")

    assert str(failed.value).startswith(
        "pip found no wheel of s3wq-test-source-only==1.0 for Lambda's platform (manylinux_2_34_aarch64, Python 3.14): "
        "the build installs wheels only (pip --only-binary=:all:), so a package published only as source cannot ship"
    ), failed.value
    assert "\n" not in str(failed.value)
    assert "No matching distribution found for s3wq-test-source-only" in capfd.readouterr().err  # pip's own words stay shown
