"""Reading and writing files: one read task per file (or Parquet fragment), one file per block.

Reads list the files in the driver (``pyarrow.dataset`` discovers folders and hive-style
partitioned layouts, ``key=value`` directories becoming columns) and make a `ReadTask` per
file, so the reads run in parallel as the first fused operator of the plan. Writes are a
one-to-one operator: each block task writes its block as one file named after the write's id
and the block's index, and returns a one-row block saying what it wrote. ``filesystem=`` takes
any ``pyarrow.fs.FileSystem``; paths are local otherwise.
"""

from __future__ import annotations

import io as _io
import itertools
import os
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from nbdist.exceptions import NbdistError

from .plan import ReadTask

_counter = itertools.count()
_FORMATS = {"parquet": "parquet", "csv": "csv", "json": "json"}


def _fs_and_paths(paths: str | list[str], filesystem: Any) -> tuple[Any, list[str]]:
    paths = [paths] if isinstance(paths, str) else list(paths)
    fs = filesystem or pafs.LocalFileSystem()
    return fs, [os.path.abspath(p) if filesystem is None else p for p in paths]


def _files(paths: list[str], fs: Any, suffixes: tuple[str, ...] | None) -> list[str]:
    out: list[str] = []
    for p in paths:
        info = fs.get_file_info(p)
        if info.type == pafs.FileType.NotFound:
            raise NbdistError(f"No file or folder at {p!r}; check the path (relative paths "
                              f"are taken from {os.getcwd()!r}).")
        if info.type == pafs.FileType.Directory:
            found = fs.get_file_info(pafs.FileSelector(p, recursive=True))
            out.extend(sorted(f.path for f in found if f.type == pafs.FileType.File and
                              not os.path.basename(f.path).startswith((".", "_")) and
                              (suffixes is None or f.path.endswith(suffixes))))
        else:
            out.append(p)
    return out


def _read_fragment(fragment: Any, schema: pa.Schema, columns: list[str] | None,
                   filter_: Any) -> pa.Table:
    table = fragment.to_table(schema=schema, columns=columns, filter=filter_)
    return table


def read_tabular(fmt: str, paths: str | list[str], filesystem: Any = None,
                 columns: list[str] | None = None, filter: Any = None,
                 partitioning: Any = "hive", **kwargs: Any) -> list[ReadTask]:
    """Read tasks for Parquet, CSV or JSON (newline-delimited) files and folders."""
    fs, roots = _fs_and_paths(paths, filesystem)
    files = _files(roots, fs, None)
    if not files:
        raise NbdistError(f"No {fmt} files under {paths!r}.")
    base = roots[0] if len(roots) == 1 and fs.get_file_info(roots[0]).type == \
        pafs.FileType.Directory else None
    dataset = pads.dataset(files, format=_FORMATS[fmt], filesystem=fs,
                           partitioning=pads.partitioning(flavor="hive")
                           if partitioning == "hive" else partitioning,
                           partition_base_dir=base)
    tasks = []
    for frag in dataset.get_fragments():
        rows = frag.metadata.num_rows if fmt == "parquet" and filter is None else None
        tasks.append(ReadTask(_read_fragment, (frag, dataset.schema, columns, filter), rows))
    return tasks


def project_reads(tasks: list[ReadTask], cols: list[str]) -> list[ReadTask] | None:
    """Parquet/CSV/JSON read tasks that read only ``cols`` (None when a column is not in the
    files' schema or outside the columns the read was asked for: nothing to push down)."""
    out = []
    for task in tasks:
        fragment, schema, columns, filter_ = task.args
        if any(c not in schema.names or (columns is not None and c not in columns)
               for c in cols):
            return None
        out.append(ReadTask(task.fn, (fragment, schema, list(cols), filter_), task.rows))
    return out


def _read_file(kind: str, path: str, fs: Any, opts: dict[str, Any]) -> pa.Table:
    with fs.open_input_file(path) as f:
        data = f.read()
    extra = {"path": [path]} if opts.get("include_paths") else {}
    if kind == "text":
        text = data.decode(opts.get("encoding", "utf-8"))
        lines = text.splitlines()
        if opts.get("drop_empty_lines", True):
            lines = [ln for ln in lines if ln.strip()]
        return pa.table({"text": lines, **({"path": [path] * len(lines)} if extra else {})})
    if kind == "binary":
        return pa.table({"bytes": [data], **extra})
    if kind == "numpy":
        from .block import from_batch

        arr = np.load(_io.BytesIO(data), allow_pickle=False)
        return from_batch({"data": arr, **({"path": [path] * len(arr)} if extra else {})})
    if kind == "image":
        from PIL import Image

        from .block import from_batch

        img: Any = Image.open(_io.BytesIO(data))
        if opts.get("mode"):
            img = img.convert(opts["mode"])
        if opts.get("size"):
            img = img.resize(tuple(reversed(opts["size"])))
        return from_batch({"image": np.asarray(img)[None, ...], **extra})
    raise NbdistError(f"Unknown file kind {kind!r}.")


def read_files(kind: str, paths: str | list[str], filesystem: Any = None,
               suffixes: tuple[str, ...] | None = None, **opts: Any) -> list[ReadTask]:
    fs, roots = _fs_and_paths(paths, filesystem)
    files = _files(roots, fs, suffixes)
    if not files:
        raise NbdistError(f"No files to read under {paths!r}.")
    return [ReadTask(_read_file, (kind, p, fs, opts)) for p in files]


def prepare_write(fmt: str, path: str, filesystem: Any, kwargs: dict[str, Any]) -> dict[str,
                                                                                     Any]:
    fs = filesystem or pafs.LocalFileSystem()
    root = os.path.abspath(path) if filesystem is None else path
    fs.create_dir(root, recursive=True)
    return {"format": fmt, "root": root, "fs": fs, "write_id": uuid.uuid4().hex[:12],
            "column": kwargs.get("column")}


def write_block(block: pa.Table, opts: dict[str, Any]) -> str:
    """Write one block as one file under the write's root; its path."""
    fmt, fs = opts["format"], opts["fs"]
    # Named by the write and the block's place: listing the folder (sorted) reads the blocks
    # back in the order they were written, and a retried task writes the same file again.
    name = f"{opts['write_id']}_{opts.get('block_index', 0):06d}.{fmt}"
    path = f"{opts['root'].rstrip('/')}/{name}"
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(block, path, filesystem=fs)
        return path
    with fs.open_output_stream(path) as out:
        if fmt == "csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(block, out)
        elif fmt == "json":
            import json

            for row in block.to_pylist():
                out.write((json.dumps(row, default=_json_default) + "\n").encode())
        elif fmt == "npy":
            from .block import column_numpy

            buf = _io.BytesIO()
            np.save(buf, column_numpy(block.column(opts["column"])))
            out.write(buf.getvalue())
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
