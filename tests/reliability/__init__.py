"""Reliability and security tier: crashes, S3 faults, poison groups, hostile input, the worker role's reach."""
