"""The file an export writes: JSON Lines or Parquet, written under a temporary name and renamed whole at the end.

An interrupted export (an error, Ctrl-C) leaves no half file, and never replaces a file it was not told to (``force``).
Both formats hold the same columns (:data:`s3wq.ops.export.COLUMNS`); ``extra`` is the JSON object itself in JSON
Lines and its JSON text in Parquet. Parquet needs pyarrow (the ``parquet`` extra), imported only when asked for.
Rows are written as they come: JSON Lines a line at a time, Parquet a row group at a time (:data:`ROW_GROUP_ROWS`
rows, or fewer when their text reaches :data:`ROW_GROUP_BYTES`), so memory holds one row group, never the export.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from s3wq.errors import BadInput, MissingExtra
from s3wq.ops.export import COLUMNS, Per, Row

ROW_GROUP_ROWS = 4096
# A row group is written sooner when its strings reach this: a few thousand 300-page documents would be gigabytes.
ROW_GROUP_BYTES = 64 * 2**20


class ExportFormat(enum.StrEnum):
    JSONL = "jsonl"
    PARQUET = "parquet"


def format_of(path: Path, given: str | None) -> ExportFormat:
    """The format named (``--format``), else the one the file's suffix names; BadInput when neither does."""
    if given is not None:
        return ExportFormat(given)
    suffix = path.suffix.lower().lstrip(".")
    formats = {"jsonl": ExportFormat.JSONL, "ndjson": ExportFormat.JSONL, "parquet": ExportFormat.PARQUET}
    if suffix not in formats:
        raise BadInput(f"{path}: cannot tell the format from its suffix: name it .jsonl or .parquet, or give --format jsonl|parquet")
    return formats[suffix]


class RowWriter(Protocol):
    def write(self, row: Row) -> None: ...

    def close(self) -> None:
        """Write what is buffered and close the file."""


class JsonlWriter:
    def __init__(self, path: Path):
        # backslashreplace: a lone surrogate (a JSON "\ud800" in a record) comes out as that very escape, valid JSON again.
        self._file: IO[str] = open(path, "w", encoding="utf-8", errors="backslashreplace", buffering=2**20)

    def write(self, row: Row) -> None:
        self._file.write(json.dumps(row, ensure_ascii=False) + "\n")

    def close(self) -> None:
        self._file.close()


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise MissingExtra("export to Parquet", "pyarrow", extra="parquet") from None
    return pyarrow


class ParquetWriter:
    def __init__(self, path: Path, per: Per):
        pa = self._pa = _pyarrow()
        types = {"str": pa.string(), "json": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
        self._columns = COLUMNS[per]
        self._schema = pa.schema([(name, types[kind]) for name, kind in self._columns.items()])
        self._writer = pa.parquet.ParquetWriter(str(path), self._schema, compression="zstd")
        self._buffer: dict[str, list] = {name: [] for name in self._columns}
        self._rows = self._bytes = 0

    def write(self, row: Row) -> None:
        row = {**row, "extra": json.dumps(row["extra"], ensure_ascii=False)}
        for name in self._columns:
            self._buffer[name].append(row[name])
        self._rows += 1
        self._bytes += len(row["extra"]) + len(row["text"] or "")
        if self._rows >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        try:
            table = self._pa.Table.from_pydict(self._buffer, schema=self._schema)
        except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot hold: U+FFFD in its place
            table = self._pa.Table.from_pydict({k: [_utf8(v) for v in values] for k, values in self._buffer.items()}, schema=self._schema)
        self._writer.write_table(table)
        self._buffer = {name: [] for name in self._columns}
        self._rows = self._bytes = 0

    def close(self) -> None:
        self._flush()
        self._writer.close()


def _utf8(value: Any) -> Any:
    return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else value


@contextlib.contextmanager
def output_file(path: Path, export_format: ExportFormat, per: Per, *, force: bool) -> Iterator[RowWriter]:
    """A writer of ``path``'s rows into a temporary file beside it, renamed to ``path`` when the block ends well.

    BadInput, before anything is read, if ``path`` exists and ``force`` is not given, or its folder does not. Without
    ``force`` the rename is a link, which fails rather than replace a file that appeared meanwhile.
    """
    if path.exists() and not force:
        raise BadInput(f"{path} exists: nothing exported (--force to replace it)")
    if not path.parent.is_dir():
        raise BadInput(f"{path.parent} is not a folder: nothing exported")
    if export_format is ExportFormat.PARQUET:
        _pyarrow()  # the missing extra named before the workspace is read
    # Not mkstemp: its file is 0600, and the export should have the mode any new file of the user's has (the umask's).
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.partial"
    temporary.touch(exist_ok=False)
    try:
        writer: RowWriter = ParquetWriter(temporary, per) if export_format is ExportFormat.PARQUET else JsonlWriter(temporary)
        try:
            yield writer
        finally:
            writer.close()
        _publish(temporary, path, force=force)
    finally:
        temporary.unlink(missing_ok=True)


def _publish(temporary: Path, path: Path, *, force: bool) -> None:
    if force:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise BadInput(f"{path} appeared during the export: nothing exported (--force to replace it)") from None
    except OSError:  # a file system without hard links: the check before the export is all there is
        if path.exists():
            raise BadInput(f"{path} appeared during the export: nothing exported (--force to replace it)") from None
        os.replace(temporary, path)
