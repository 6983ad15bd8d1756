"""Run the ``ocr`` processor of whichever tree PYTHONPATH names over groups of local documents: ``python doc_processor_run.py SPEC.json``.

bench/doc_quality.py starts it once per system in the OCR venv, with
PYTHONPATH at the current tree's lambdas/ ("after") or at a ``git archive``
of an earlier revision ("before"), so both run the same way, as
tests/ocr/run_group.py and a worker do: ``load_processor("ocr")``, a
LocalBackend workspace, one ``ProcessorContext`` per group. SPEC is
``{"workspace": FOLDER, "groups": [{"name": ..., "paths": [...]}, ...]}``.

It prints one JSON object: which s3wq it loaded, the load's seconds and, per
group, the records and the group's core-seconds: this process's CPU time
plus that of the children it waited for (the decoder, ended and reaped at
the end of each group), with OMP_NUM_THREADS=1 as the processor sets it.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

RUN_SECONDS = 3600  # a group's deadline: far past any group here, so no input is cut short by its share of the time


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_group(processor, backend, name: str, paths: list[str]) -> dict:
    from s3wq.model import Group
    from s3wq.processors import ProcessorContext
    from s3wq.store import layout

    group = Group(layout.group_hash(paths), tuple(paths))
    ctx = ProcessorContext(worker_id=f"w-doc-quality-{name}", attempt=1, deadline=time.time() + RUN_SECONDS, group=group, backend=backend)
    started, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
    processor(group, ctx)
    seconds = time.perf_counter() - started
    core_seconds = time.process_time() - cpu + children_cpu() - children
    body = backend.read(layout.result_key(group.hash)).body.decode("utf-8")
    return {
        "name": name,
        "records": [json.loads(line) for line in body.splitlines()],
        "wall_seconds": round(seconds, 3),
        "core_seconds": round(core_seconds, 3),
    }


def main(spec_path: str) -> dict:
    import s3wq
    from s3wq.processors import load_processor
    from s3wq.store import LocalBackend

    spec = json.loads(Path(spec_path).read_text())
    started = time.perf_counter()
    processor = load_processor("ocr")
    loaded = time.perf_counter() - started
    backend = LocalBackend(spec["workspace"])
    groups = [run_group(processor, backend, group["name"], group["paths"]) for group in spec["groups"]]
    return {"s3wq": str(Path(s3wq.__file__).parent), "load_seconds": round(loaded, 2), "groups": groups}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
