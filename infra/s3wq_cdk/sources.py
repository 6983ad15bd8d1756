"""What every asset is made of, found the same way from a checkout and from an installed wheel; no CDK.

* s3wq's runtime: the installed ``s3wq`` package's own folder, less the
  tools (:data:`NOT_SHIPPED`, the rule ``lambdas/s3wq/__init__.py`` states);
* the pinned requirements: the files in ``requirements/`` beside this module.
  In a checkout each is a symbolic link to the file of that name at the
  root, which stays the one source (``make install`` and the tests read it);
  setuptools copies a link's target as a file into the sdist and the wheel,
  so an installed s3wq_cdk carries the same bytes (tests/e2e/test_wheel.py
  compares them). A link rather than a build step: an editable install and a
  plain checkout read through it with no step to forget.

The lowest module of the package: every other imports from here, this imports
none of them.
"""

from __future__ import annotations

from pathlib import Path

import s3wq

S3WQ_DIR = Path(s3wq.__file__).resolve().parent
# The folder holding the s3wq package: lambdas/ in a checkout, site-packages when installed.
SOURCES_ROOT = S3WQ_DIR.parent
PACKAGES = ("s3wq",)
# Relative to SOURCES_ROOT: what is not shipped, because no handler runs it.
NOT_SHIPPED = ("s3wq/cli", "s3wq/dev", "s3wq/__main__.py")

REQUIREMENTS_DIR = Path(__file__).resolve().parent / "requirements"


def requirements_file(name: str) -> Path:
    """The pinned file ``name`` (``requirements.txt``, a profile's ``requirements_file``): in a checkout, the root's own file.

    Resolved, so that a checkout's messages and cache keys name the file one
    edits, not the link to it.
    """
    return (REQUIREMENTS_DIR / name).resolve()


REQUIREMENTS = requirements_file("requirements.txt")


def _checkout_root() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "app.py").is_file() and (root / "lambdas" / "s3wq").is_dir() else None


# The checkout this package runs from (app.py, infra/, lambdas/ side by side), or None when installed from a
# wheel: where the local cloud finds the CDK app it synthesizes. Computed here once; nothing else walks up.
CHECKOUT_ROOT = _checkout_root()
