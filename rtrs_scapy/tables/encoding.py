"""Parquet row groups encoded on a thread of their own while the next is made:
Parquet's encoding and Arrow's compute run without the GIL, so the thread that makes
the rows (the analysis, or the ``messages`` table from the records) does not wait
for them.  One row group is in writing at a time: memory holds two at most."""

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import schema


def parquet_writer(path, table):
    """A Parquet writer of ``table`` (schema.py) into ``path``.  Dictionary encoding
    only for its strings and narrow numbers: the 64-bit columns (frames, times,
    sectors, latencies) have nearly every value distinct, and trying a dictionary on
    them cost a quarter of the encoding and made the file larger (docs/export.md)."""
    fields = schema(table)
    wide = [pa.types.is_int64(f.type) or pa.types.is_timestamp(f.type)
            or pa.types.is_floating(f.type) for f in fields]
    return pq.ParquetWriter(path, fields, use_dictionary=[
        f.name for f, is_wide in zip(fields, wide) if not is_wide])


class Encoder:
    """Writes Arrow tables with ``writer`` (a ``pq.ParquetWriter``) in the background;
    ``after()`` runs on that thread after each.  An error of a write comes out of the
    next call."""

    def __init__(self, writer, after=None):
        self.writer = writer
        self.after = after
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="rtrs-parquet")
        self.writing = None

    def write(self, table, **options):
        self.wait()
        self.writing = self.pool.submit(self._write, table, options)

    def _write(self, table, options):
        self.writer.write_table(table, **options)
        if self.after is not None:
            self.after()

    def wait(self):
        """Until the row group in writing is written."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def close(self):
        """The last row group written, the file closed."""
        try:
            self.wait()
        finally:
            self.pool.shutdown()
            self.writer.close()
