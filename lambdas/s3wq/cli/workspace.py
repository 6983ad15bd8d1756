"""Opening the workspace a command names, and what its workers may read."""

from __future__ import annotations

import argparse

from s3wq.index import WorkIndex
from s3wq.inputs import ANYTHING, InputPolicy
from s3wq.store import LocalBackend, S3Backend, open_backend


def open_workspace(uri: str) -> LocalBackend | S3Backend:
    backend = open_backend(uri)
    backend.check()
    return backend


def open_indexed_workspace(uri: str):
    """The workspace's backend; NoIndex (exit 2) if nothing was populated there."""
    backend = open_workspace(uri)
    WorkIndex(backend).require()
    return backend


def input_policy(args: argparse.Namespace, backend) -> InputPolicy:
    """What populate may index and a worker of this command line may read.

    On S3 the workers may be Lambdas, which read no local file, and the index
    is shared with whoever may write the workspace: local inputs only when
    asked for, and only the buckets of --input-locations when it is given
    (without it, any bucket this machine's credentials may read). A local
    workspace is the user's own: anything their shell can name.
    """
    if isinstance(backend, S3Backend):
        return InputPolicy.s3_workspace(allow_local=args.allow_local_inputs, locations=args.input_locations)
    return ANYTHING if args.input_locations is None else InputPolicy(locations=args.input_locations)
