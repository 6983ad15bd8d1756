"""The vlm and auto processors against the stand-in endpoint: a worker's pages per second at a stated model latency,
its memory, and the share of pages ``auto`` escalates on #29's document corpus; with the cost model per million pages.

No model runs here (no GPU, no weights): the stand-in (s3wq.dev.vlm_standin) answers each request after ``--latency``
seconds, as a model server busy with other work would, with no cap on the answers in progress. So the figures are the
worker's side: how many pages one worker keeps moving, what it costs on Lambda while it waits, and what it sends.
The model's own cost per page is an anchor: olmocr's published $176 per million pages on its own GPUs.

    .venv-ocr/bin/python bench/vlm.py --latency 2 --in-flight 1,16 --pages 48 --corpus-size tiny > vlm.json

Runs in the OCR venv (the vlm extra is the ocr extra's packages; reportlab draws the corpus).
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import REPO_ROOT, emit, machine, peak_rss_mb, positive_ints
from ocr_cost import PRICE_GB_SECOND, PRICE_PER_MILLION_REQUESTS

sys.path.insert(0, str(REPO_ROOT / "lambdas"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

OLMOCR_USD_PER_MILLION_PAGES = 176.0  # olmOCR paper (arXiv 2502.18443), on its own GPUs
VLM_MEMORY_MB = 1769  # profiles.py's vlm and auto worker
RUN_SECONDS = 3600


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run_group(processor, paths: list[str], workspace: Path) -> tuple[list[dict], float, float]:
    import json

    from s3wq.model import Group
    from s3wq.processors import ProcessorContext
    from s3wq.store import LocalBackend, layout

    group = Group(layout.group_hash(paths), tuple(paths))
    backend = LocalBackend(str(workspace))
    ctx = ProcessorContext(worker_id="bench-vlm", attempt=1, deadline=time.time() + RUN_SECONDS, group=group, backend=backend)
    wall, cpu = time.perf_counter(), _cpu()
    processor(group, ctx)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    records = [json.loads(line) for line in backend.read(layout.result_key(group.hash)).body.decode().splitlines()]
    return records, wall, cpu


def _long_pdf(folder: Path, pages: int) -> Path:
    from doc_corpus import Layout, born_digital, lay_out

    path = folder / "long.pdf"
    path.write_bytes(born_digital(lay_out(Layout.JOURNAL, 4242, pages)))
    return path


def throughput(folder: Path, pages: int, latency: float, in_flights: list[int]) -> list[dict]:
    """One worker's vlm run over a ``pages``-page born-digital PDF, at each number of pages in flight."""
    from s3wq.dev.vlm_standin import StandIn

    pdf = _long_pdf(folder, pages)
    rows = []
    for in_flight in in_flights:
        with StandIn(latency=latency) as standin:
            os.environ.update(S3WQ_VLM_ENDPOINT=standin.url, S3WQ_VLM_IN_FLIGHT=str(in_flight))
            processor = _fresh_processor("vlm")
            records, wall, cpu = _run_group(processor, [str(pdf)], folder / f"ws-{in_flight}")
            peak = standin.peak_in_flight
        (record,) = records
        assert record["metadata"]["pdf-total-pages"] == pages and "error" not in record, record.get("error")
        rows.append(
            {
                "in_flight": in_flight,
                "pages": pages,
                "wall_s": round(wall, 2),
                "pages_per_s": round(pages / wall, 2),
                "worker_core_s_per_page": round(cpu / pages, 4),
                "peak_in_flight_seen_by_endpoint": peak,
                "lambda_usd_per_million_pages": round(1e6 * (wall / pages) * VLM_MEMORY_MB / 1024 * PRICE_GB_SECOND, 2),
            }
        )
    return rows


def _fresh_processor(name: str):
    """The processor with this process's settings read again (they are read once per process otherwise)."""
    from s3wq.processors import load_processor
    from s3wq.processors.vlm import processor as vlm_processor
    from s3wq.processors.vlm import settings

    settings.current_settings.cache_clear()
    vlm_processor._kit.cache_clear()
    return load_processor(name)


def escalation(folder: Path, size: str) -> dict:
    """``auto`` over #29's corpus: the pages by route, and the share sent to the model."""
    import doc_corpus

    from s3wq.dev.vlm_standin import StandIn

    manifest = doc_corpus.build(folder / "corpus", doc_corpus.Size(size), 29)
    paths = [str(folder / "corpus" / document["file"]) for document in manifest["documents"]]
    with StandIn() as standin:
        os.environ.update(S3WQ_VLM_ENDPOINT=standin.url, S3WQ_VLM_IN_FLIGHT="16")
        processor = _fresh_processor("auto")
        routes: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        cpu = 0.0
        for path in paths:  # one input a group, as the benchmark of #29 runs them
            records, _, seconds = _run_group(processor, [path], folder / "ws-auto")
            cpu += seconds
            for page in records[0]["metadata"]["pages"]:
                routes[page["route"]] += 1
                if "escalated" in page:
                    reasons[page["escalated"].split(" (")[0]] += 1
        sent = len(standin.requests())
    pages = sum(routes.values())
    return {
        "corpus_size": size,
        "documents": len(paths),
        "pages": pages,
        "pages_by_route": dict(routes),
        "escalated_by_reason": dict(reasons),
        "model_requests": sent,
        "escalated_share": round(routes["vlm"] / pages, 3) if pages else None,
        "cpu_core_s_per_page": round(cpu / pages, 3) if pages else None,
    }


def cost_model(best: dict, escalated_share: float | None, cpu_core_s_per_page: float | None) -> dict:
    """Per million pages: the worker on Lambda while it waits, the model (olmocr's anchor), and auto's mix."""
    requests = PRICE_PER_MILLION_REQUESTS / 10  # a group of ~10 pages an invocation's request, at most
    vlm_worker = best["lambda_usd_per_million_pages"] + requests
    vlm = {
        "worker_usd": round(vlm_worker, 2),
        "model_usd": OLMOCR_USD_PER_MILLION_PAGES,
        "usd": round(vlm_worker + OLMOCR_USD_PER_MILLION_PAGES, 2),
    }
    result = {"vlm": vlm, "olmocr_usd_per_million_pages": OLMOCR_USD_PER_MILLION_PAGES}
    if escalated_share is not None and cpu_core_s_per_page is not None:
        cpu = 1e6 * cpu_core_s_per_page * VLM_MEMORY_MB / 1024 * PRICE_GB_SECOND
        model = escalated_share * (OLMOCR_USD_PER_MILLION_PAGES + best["lambda_usd_per_million_pages"])
        result["auto"] = {"cpu_usd": round(cpu, 2), "model_usd": round(model, 2), "usd": round(cpu + model + requests, 2)}
    result["assumptions"] = [
        "the model's cost per page is olmocr's published $176 per million pages (its GPUs, its batch sizes): not measured here",
        f"the worker is Lambda arm64 at {VLM_MEMORY_MB} MB, billed for its wall time while pages wait on the model",
        "auto's CPU pages are billed at this machine's core-seconds per page as one Lambda vCPU's",
        "one invocation request per group of ~10 pages; S3 requests per group are priced in docs/performance.md",
    ]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the stand-in takes to answer a page (default 2)")
    parser.add_argument("--in-flight", type=positive_ints, default=[1, 16], help="pages in flight per worker, e.g. 1,16")
    parser.add_argument("--pages", type=int, default=48, help="pages of the PDF one worker reads (default 48)")
    parser.add_argument("--corpus-size", choices=["none", "tiny", "small", "full"], default="tiny", help="#29's corpus for auto")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="s3wq-bench-vlm-") as tmp:
        folder = Path(tmp)
        rows = throughput(folder, args.pages, args.latency, args.in_flight)
        vlm_peak = peak_rss_mb()  # the vlm runs' peak, before auto loads the OCR engine's pages
        routed = escalation(folder, args.corpus_size) if args.corpus_size != "none" else None
    best = max(rows, key=lambda row: row["pages_per_s"])
    result = {
        "benchmark": "vlm",
        "machine": machine(),
        "params": {"latency_s": args.latency, "in_flight": args.in_flight, "pages": args.pages, "date": datetime.date.today().isoformat()},
        "throughput": rows,
        "peak_rss_mb_vlm": vlm_peak,
        "peak_rss_mb": peak_rss_mb(),
        "auto_on_corpus": routed,
        "cost_per_million_pages": cost_model(best, routed and routed["escalated_share"], routed and routed["cpu_core_s_per_page"]),
    }
    header = ["in flight", "pages/s", "worker core-s/page", "peak in flight", "Lambda $/M pages"]
    table = [
        [
            r["in_flight"],
            r["pages_per_s"],
            r["worker_core_s_per_page"],
            r["peak_in_flight_seen_by_endpoint"],
            r["lambda_usd_per_million_pages"],
        ]
        for r in rows
    ]
    emit(result, table, header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
