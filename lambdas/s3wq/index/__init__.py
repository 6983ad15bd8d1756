"""The work index: which groups exist and which paths each holds.

Two layouts are read, one is written:

* olmocr's single ``work_index_list.csv.zstd`` is read as it is, whenever it
  exists, so s3wq can drain a workspace olmocr populated
  (:mod:`s3wq.index.olmocr`). Nothing is written there: a worker may only
  read the index.
* s3wq writes immutable *segments* under ``index/segments/`` and lists them
  in ``index/catalog.json`` (:mod:`s3wq.index.catalog`); a populate adds
  segments and swaps the catalog on its ETag (:mod:`s3wq.index.populate`).

Both hold the same zstd CSV rows, ``hash,path1,path2,...``
(:mod:`s3wq.index.codec`). :class:`WorkIndex` reads and writes a workspace's
index whichever layouts it holds; the names below are the package's public
surface.

What populate is given comes in here too: :mod:`s3wq.index.sources` expands
S3 URIs, globs, local paths and @manifests into input paths, reading each
manifest with :mod:`s3wq.index.manifests` (its formats and limits) and asking
:mod:`s3wq.index.s3_sources` which named S3 objects exist.
"""

from s3wq.index.catalog import CATALOG_FORMAT, SEGMENT_TARGET_GROUPS, Catalog, SegmentInfo, SegmentRef, prefix_length
from s3wq.index.codec import decode_groups, encode_groups, stream_groups
from s3wq.index.populate import PARALLEL_SEGMENT_WRITES, PopulateResult, make_groups
from s3wq.index.work_index import WorkIndex

__all__ = [
    "CATALOG_FORMAT",
    "PARALLEL_SEGMENT_WRITES",
    "SEGMENT_TARGET_GROUPS",
    "Catalog",
    "PopulateResult",
    "SegmentInfo",
    "SegmentRef",
    "WorkIndex",
    "decode_groups",
    "encode_groups",
    "make_groups",
    "prefix_length",
    "stream_groups",
]
