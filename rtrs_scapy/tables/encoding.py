"""Parquet row groups encoded on a thread of their own while the next is made:
Parquet's encoding and Arrow's compute run without the GIL, so the thread that makes
the rows (the analysis, or the ``messages`` table from the records) does not wait
for them.  One row group is in writing at a time: memory holds two at most."""

from concurrent.futures import ThreadPoolExecutor


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
