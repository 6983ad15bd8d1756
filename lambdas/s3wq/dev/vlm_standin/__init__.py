"""A stand-in for olmocr's vision-language model: an OpenAI-compatible server on a loopback port, and no model.

The tests, the benchmarks and ``s3wq local demo --processor vlm`` run the ``vlm`` processor against it where there is
no GPU. It answers ``POST /v1/chat/completions`` and ``GET /v1/models`` as vLLM's OpenAI server does, refuses every
request olmocr 0.4.27's pipeline would never send (checks.py), answers in olmocr's format (answers.py) as it is
scripted to (script.py: ``ok``, ``status``, ``slow``, ``malformed``, ``rotated``, ``length``, ``too_long``, ``drop``,
``table``), tells pages apart by their images (pages.py, png.py), and records every request (journal.py).

``StandIn`` (server.py) runs it in this process; ``RemoteStandIn`` (remote.py) drives one in another, which
``python -m s3wq.dev.vlm_standin`` starts. A developer tool: never in the Lambda runtime.
"""

from .journal import Record
from .remote import RemoteStandIn
from .script import BadStep, Behaviour, Step
from .server import StandIn

__all__ = ["BadStep", "Behaviour", "Record", "RemoteStandIn", "StandIn", "Step"]
