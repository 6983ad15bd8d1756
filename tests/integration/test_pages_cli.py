"""Pages as a unit of progress, through the command line: the text processor's pages in the report, the done flags, status and -v."""

from __future__ import annotations

import json
import re

from support import run_cli

from s3wq import WorkIndex, open_backend
from s3wq.dev.samples import make_pdf
from s3wq.store import layout

# Three groups of two PDFs: 1+2, 3+4 and 5+6 pages.
PAGES = [1, 2, 3, 4, 5, 6]


def test_text_on_multi_page_pdfs_counts_their_pages_in_the_report_the_flags_status_and_v(tmp_path):
    paths = []
    for n, count in enumerate(PAGES):
        path = tmp_path / f"doc-{n}.pdf"
        path.write_bytes(make_pdf([[f"page {p} of document {n}"] for p in range(count)]))
        paths.append(str(path))
    workspace = str(tmp_path / "ws")
    assert run_cli("populate", workspace, *paths, "--group-size", "2").returncode == 0

    worked = run_cli("-v", "work", workspace, "--processor", "text", "--json")

    assert worked.returncode == 0, worked.stderr
    report = json.loads(worked.stdout)
    assert (report["processed"], report["pages"]) == (3, sum(PAGES))
    assert report["pages_per_second"] > 0
    backend = open_backend(workspace)
    by_hash = {g.hash: g for g in WorkIndex(backend).iter_groups()}
    flags = {h: json.loads(backend.read(layout.done_key(h)).body)["pages"] for h in by_hash}
    assert sorted(flags.values()) == [3, 7, 11]
    # -v: one line per group's end, with its pages and its seconds.
    ends = dict(re.findall(r"group ([0-9a-f]{40}) done, (\d+) pages in \d+\.\d s", worked.stderr))
    assert {h: int(p) for h, p in ends.items()} == flags, worked.stderr

    status = json.loads(run_cli("status", workspace, "--json").stdout)
    assert status["pages"] == {"pages": 21, "groups": 3, "unknown": 0, "estimated": False, "per_group": 7.0}
    shown = run_cli("status", workspace).stdout.splitlines()
    assert "pages: 21 done, 7.0 per done group" in shown
