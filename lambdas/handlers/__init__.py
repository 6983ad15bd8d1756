"""Lambda entry points: ``handlers.populate.handler``, ``handlers.worker.handler``, ``handlers.status.handler``.

Each handler parses its event, calls the s3wq library and returns a small
JSON-serialisable dict; everything is wired once per cold start in
:mod:`handlers.runtime`.
"""
