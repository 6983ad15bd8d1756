"""Lambda entry points: ``s3wq.handlers.populate.handler``, ``s3wq.handlers.worker.handler``, ``s3wq.handlers.status.handler``.

Each handler parses its event, calls the s3wq library and returns a small
JSON-serialisable dict; everything is wired once per cold start in
:mod:`s3wq.handlers.runtime`.
"""
