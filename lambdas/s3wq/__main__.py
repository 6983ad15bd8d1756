"""``python -m s3wq``: the command line, as the ``s3wq`` console script runs it."""

from s3wq.cli import entry_point

entry_point()
