"""Parquet row groups encoded on a thread of their own while the next is made:
Parquet's encoding and Arrow's compute run without the GIL, so the thread that makes
the rows (the analysis, or the ``messages`` table from the records) does not wait
for them.  One row group is in writing at a time: memory holds two at most."""

import base64
import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from .arrays import TEXTS
from .schema import JSON_TEXTS, schema

#: texts (JSON) nearly all distinct: written without a dictionary (parquet_writer)
DISTINCT_TEXTS = frozenset(("rnbd",))
#: the file's key-value metadata entry where Arrow keeps a file's Arrow schema
ARROW_SCHEMA = b"ARROW:schema"
#: rows the writer encodes at a time: a row group's worth (the tables' row groups are
#: 16,384 rows), rather than Parquet's 1,024, whose checks of the page's size and the
#: dictionary's after every 1,024 rows cost the ``messages`` table a fifteenth of its
#: encoding (docs/benchmarks.md)
WRITE_BATCH_ROWS = 1 << 14


def arriving(fields, columns):
    """The schema ``fields`` of a piece made of ``columns`` (name -> Arrow array): a
    column its builder made as texts by index (arrays.TEXTS) is of that type."""
    return pa.schema([field.with_type(TEXTS) if columns[field.name].type == TEXTS else field
                      for field in fields])


def parquet_writer(path, table, pieces=None):
    """A Parquet writer of ``table`` (schema.py) into ``path``, taking Arrow tables of
    the schema ``pieces`` (default: the table's; its texts may be dictionaries).

    The file's Arrow schema is the table's whatever the pieces were: readers get
    strings, not dictionaries, and the file is the one plain strings would have made.
    Dictionary encoding only for its strings and narrow numbers: the 64-bit columns
    (frames, times, sectors, latencies) and a request's RNBD header (``rnbd``, with its
    sector) have nearly every value distinct, and trying a dictionary on them cost a
    quarter of the encoding and made the file larger or no smaller.  Their
    integers (frames, times, sectors, QPs) are written as deltas: frames and times
    grow a little from row to row.  Statistics (a row group's min and max) for every
    column but the JSON texts, which they would not prune (docs/export.md)."""
    fields = schema(table)
    pieces = fields if pieces is None else pieces
    deltas = [f.name for f in fields if pa.types.is_int64(f.type) or pa.types.is_timestamp(f.type)]
    writer = pq.ParquetWriter(path, pieces.remove_metadata(), store_schema=False,
                              write_batch_size=WRITE_BATCH_ROWS, use_dictionary=[
        f.name for f in fields if f.name not in deltas and f.name not in DISTINCT_TEXTS
        and not pa.types.is_floating(f.type)],
        column_encoding=dict.fromkeys(deltas, "DELTA_BINARY_PACKED"), write_statistics=[
        f.name for f in fields if f.name not in JSON_TEXTS])
    writer.add_key_value_metadata({
        ARROW_SCHEMA: base64.b64encode(fields.serialize().to_pybytes()), **fields.metadata})
    return writer


#: resident memory (bytes) above which the C heap is trimmed after a row group
TRIM_ABOVE = 192 << 20


def _heap_trimmer():
    """glibc's ``malloc_trim``, while the process holds more than TRIM_ABOVE, else a
    no-op; returns whether it trimmed.  A row group's buffers are freed to the C
    allocator (docs/export.md#memory), whose heap they leave in holes that glibc
    keeps resident (5 to 40 MiB of them): given back after each row group, the
    largest exports stay under 300 MB (10 M packets of many short sessions), but
    the next row group's buffers then fault every page in again: a tenth of the time
    of ``export`` of 3 M load packets.  Below TRIM_ABOVE the holes are kept for the
    next row group."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
        page = os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm", "rb"):
            pass
    except (AttributeError, OSError, TypeError, ValueError):
        return lambda: False

    def trim_heap():
        with open("/proc/self/statm", "rb") as statm:
            resident = int(statm.read().split()[1]) * page
        if resident <= TRIM_ABOVE:
            return False
        trim(0)
        return True
    return trim_heap


_trim_heap = _heap_trimmer()


class Encoder:
    """Writes Arrow tables into the Parquet file ``path`` of ``table`` in the
    background, the C heap trimmed after each (``_heap_trimmer``).  The first table's
    schema is the one of every table after it (a table of another is cast to it).  An
    error of a write comes out of the next call."""

    def __init__(self, path, table):
        self.path = path
        self.table = table
        self.writer = None
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="rtrs-parquet")
        self.writing = None

    def write(self, table, **options):
        self.wait()
        if self.writer is None:
            self.writer = parquet_writer(self.path, self.table, table.schema)
        elif not table.schema.equals(self.writer.schema):
            table = table.cast(self.writer.schema)
        self.writing = self.pool.submit(self._write, table, options)

    def _write(self, table, options):
        self.writer.write_table(table, **options)
        _trim_heap()

    def wait(self):
        """Until the row group in writing is written."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def close(self):
        """The last row group written, the file closed (a file of no rows when none
        was written)."""
        try:
            self.wait()
        finally:
            self.pool.shutdown()
            if self.writer is None:
                self.writer = parquet_writer(self.path, self.table)
            self.writer.close()
