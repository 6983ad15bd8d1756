"""The processor contract, the built-in processors and how a processor is named.

A processor is ``fn(group, ctx)``. ``group`` has ``hash`` and ``paths``;
``ctx`` tells the worker id, the attempt number and the deadline, and reads
inputs and writes the group's result object. A processor that raises has
used one attempt; s3wq catches it, never the other way round.
"""

from s3wq.processors.builtins import noop, text
from s3wq.processors.context import MAX_INPUT_ERRORS_KEPT, Processor, ProcessorContext
from s3wq.processors.loading import BUILTIN_NAMES, BUILTIN_PROCESSORS, importable_from_current_directory, load_processor

__all__ = [
    "BUILTIN_NAMES",
    "BUILTIN_PROCESSORS",
    "MAX_INPUT_ERRORS_KEPT",
    "Processor",
    "ProcessorContext",
    "importable_from_current_directory",
    "load_processor",
    "noop",
    "text",
]
