from s3wq.cli import entry_point

entry_point()
