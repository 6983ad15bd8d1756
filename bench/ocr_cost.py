"""bench/ocr.py's cost model (Lambda arm64 at the prices of a stated date, beside published anchors) and its targets."""

from __future__ import annotations

import statistics

from common import target
from ocr_pages import DEGRADED

# Lambda arm64, us-east-1, as assumed on this date.
PRICE_DATE = "2026-12-01"
PRICE_GB_SECOND = 0.0000133334
PRICE_PER_MILLION_REQUESTS = 0.20
ANCHORS = [
    {"name": "olmocr (7B VLM on GPUs)", "usd_per_million_pages": 176.0, "source": "olmOCR paper, arXiv 2502.18443"},
    {"name": "GPT-4o", "usd_per_million_pages": 6240.0, "more_than": True, "source": "olmOCR paper, arXiv 2502.18443"},
    {"name": "dots.ocr on Modal GPUs", "usd_per_million_pages": 2270.0, "source": "$2.27 per 1,000 pages, measured by a third party"},
    {
        "name": "Amazon Textract DetectDocumentText",
        "usd_per_million_pages": 1500.0,
        "source": "AWS's Textract pricing page: $1.50 per 1,000 pages for a month's first million, $0.60 beyond (us-east-1); "
        "as last read there, not re-checked from this machine, which reaches no web page",
    },
]


# What the cost model prices with and assumes, as the JSON states it.
COST_MODEL = {
    "prices": {
        "date_assumed": PRICE_DATE,
        "region": "us-east-1",
        "architecture": "arm64",
        "usd_per_gb_second": PRICE_GB_SECOND,
        "usd_per_million_requests": PRICE_PER_MILLION_REQUESTS,
    },
    "assumptions": [
        "ASSUMED, not measured: one Lambda arm64 vCPU-second does the work of one core-second of this machine",
        "billed duration per page = the CPU seconds per page of the one-thread run (render + OCR), i.e. core-seconds; "
        "wall seconds are printed beside them and exceed them when this machine is shared",
        "one request per page (worst case); model load is paid once per cold start, not per page",
        "one thread uses one vCPU at any memory size, so more memory costs more per page",
    ],
    "anchors": ANCHORS,
}

TARGET_CER_CLEAN = 0.02
TARGET_CER_DEGRADED = 0.05
TARGET_TEXT_PAGES_PER_S = 50.0
TARGET_CORE_S_PER_PAGE = 3.0
TARGET_USD_PER_MILLION = 60.0


def lambda_cost(s_per_page: float, memory_mb: int) -> dict:
    compute = 1_000_000 * s_per_page * memory_mb / 1024 * PRICE_GB_SECOND
    requests = PRICE_PER_MILLION_REQUESTS  # one request per page
    return {"memory_mb": memory_mb, "usd_compute": round(compute, 2), "usd_requests": requests, "usd": round(compute + requests, 2)}


def by_render_dpi(cells: list[dict], memories: list[int]) -> dict:
    """Speed and cost of the PDF scans at each render dpi, all conditions together."""
    by_render: dict[str, dict] = {}
    for dpi in sorted({c["render_dpi"] for c in cells}):
        here = [c for c in cells if c["render_dpi"] == dpi and c["condition"] != "png"]
        if not here:
            continue
        pages = sum(c["pages"] for c in here)
        s = sum(c["s_per_page"] * c["pages"] for c in here) / pages
        core_s = sum(c["cpu_s_per_page"] * c["pages"] for c in here) / pages
        by_render[str(dpi)] = {
            "pages": pages,
            "s_per_page": round(s, 3),
            "cpu_s_per_page": round(core_s, 3),
            "pages_per_s_per_core": round(1 / core_s, 3),
            "mean_cer": round(statistics.fmean(c["cer"] for c in here), 4),
            "cost_per_million_pages": [lambda_cost(core_s, m) for m in memories],
        }
    return by_render


def build_targets(cells: list[dict], text_layer: dict, by_render: dict, headline_dpi: int, memories: list[int]) -> list[dict]:
    def cer(condition: str, dpi: int) -> float | None:
        """The worst CER of ``condition`` among pages rendered at ``dpi``, whatever dpi they were scanned at."""
        found = [c["cer"] for c in cells if c["condition"] == condition and c["render_dpi"] == dpi]
        return max(found, default=None)

    degraded_here = [cer(c, headline_dpi) for c in DEGRADED if cer(c, headline_dpi) is not None]
    degraded_all = [c["cer"] for c in cells if c["condition"] in DEGRADED]
    headline = by_render.get(str(headline_dpi), {})
    s = headline.get("cpu_s_per_page")
    cheapest = min((c["usd"] for c in headline.get("cost_per_million_pages", [])), default=None)
    return [
        target(f"CER clean, rendered at {headline_dpi} dpi", cer("clean", headline_dpi), TARGET_CER_CLEAN),
        target(f"CER worst degraded condition, rendered at {headline_dpi} dpi", max(degraded_here, default=None), TARGET_CER_DEGRADED),
        target("CER worst degraded condition, any dpi", max(degraded_all, default=None), TARGET_CER_DEGRADED),
        target("text-layer pages exact (fraction)", text_layer["exact_pages"] / text_layer["pages"], 1.0, at_most=False),
        target("text-layer pages/s", text_layer["pages_per_s"], TARGET_TEXT_PAGES_PER_S, at_most=False),
        target(f"s of one core per scanned page, {headline_dpi} dpi", s, TARGET_CORE_S_PER_PAGE, unit=" s"),
        target(f"USD per million scanned pages, Lambda arm64 {min(memories)} MB, {headline_dpi} dpi", cheapest, TARGET_USD_PER_MILLION),
    ]
