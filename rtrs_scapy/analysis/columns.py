"""Growable numpy columns: a table that rows are appended to in batches, for the
message records (records.py) — a few bytes per value instead of a Python object.

With ``chunk`` rows, at most HELD chunks' worth of the newest rows stay in memory:
the older ones go to files (spill.py), all but the newest chunk's worth at once, so
the table does not grow in memory with the capture.  Rows are read and written by their number (``take``, ``put``),
wherever they are."""

from collections.abc import Mapping

import numpy as np

from ..engine.distinct import distinct
from .growing import capacity_for
from .spill import CACHED, ChunkFiles

#: chunks' worth of rows held in memory before the older ones are spilled: the newest
#: chunk's worth stays, and is moved to the other set of arrays (a spill of one chunk
#: at two held moved a chunk and a batch of rows for every chunk spilled)
HELD = 3


class Columns:
    """``spec``: name -> (dtype, default).  Rows are added by ``extend`` (their
    values are the defaults until set); ``data[name][row - base]`` holds the rows
    from ``base`` on (all of them without ``chunk``)."""

    def __init__(self, spec, chunk=None, capacity=1024):
        self.spec = spec
        self.n = 0
        self.base = 0
        self.files = ChunkFiles(spec, chunk) if chunk else None
        self.data = {name: np.full(capacity, default, dtype=dtype)
                     for name, (dtype, default) in spec.items()}
        self.spare = None           # the arrays the rows were in before the last spill
        self.spare_used = 0         # and how many of their rows held values

    def __len__(self):
        return self.n

    def extend(self, count):
        """Room for ``count`` more rows; returns the number of the first (its values
        are in ``data`` until the next ``extend``)."""
        files = self.files
        if files is not None and self.n - self.base >= HELD * files.rows:
            self._spill()
        start = self.n
        need = start - self.base + count
        capacity = len(next(iter(self.data.values())))
        if need > capacity:
            capacity = capacity_for(need)
            for name, (dtype, default) in self.spec.items():
                grown = np.full(capacity, default, dtype=dtype)
                grown[:start - self.base] = self.data[name][:start - self.base]
                self.data[name] = grown
        self.n = start + count
        return start

    def _spill(self):
        """The oldest chunks of rows in memory to files, all but the newest chunk's
        worth.  The newest rows move to the other of two sets of arrays rather than
        down within theirs: the chunks' arrays stay as they are while the files'
        thread writes them."""
        held = self.n - self.base
        rows = (held - self.files.rows) // self.files.rows * self.files.rows
        old, spare = self.data, self.spare
        capacity = len(next(iter(old.values())))
        self.files.wait()           # the spare's own chunks written before it is reused
        if spare is None or len(next(iter(spare.values()))) != capacity:
            spare, self.spare_used = {name: np.full(capacity, default, dtype=dtype)
                                      for name, (dtype, default) in self.spec.items()}, 0
        for name, (dtype, default) in self.spec.items():
            column = spare[name]
            column[:held - rows] = old[name][rows:held]
            column[held - rows:self.spare_used] = default
        self.files.write({name: column[:rows] for name, column in old.items()})
        self.data, self.spare, self.spare_used = spare, old, held
        self.base += rows

    def finish(self):
        """The rows on file all written (spill.py ``ChunkFiles.finish``)."""
        if self.files is not None:
            self.files.finish()

    def put(self, name, rows, values):
        """``values`` (one, or one per row) into column ``name`` at ``rows`` (an int:
        one row)."""
        if isinstance(rows, int) and rows >= self.base:
            self.data[name][rows - self.base] = values
            return
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        values = np.asarray(values, dtype=self.spec[name][0])
        if values.shape != rows.shape:
            values = np.full(rows.shape, values, dtype=values.dtype)
        here = rows >= self.base
        if here.all():
            self.data[name][rows - self.base] = values
            return
        self.data[name][rows[here] - self.base] = values[here]
        self.files.patch(name, rows[~here], values[~here])

    def put_columns(self, rows, columns):
        """``columns`` (name -> values, one or one per row) into ``rows`` (an array): a
        batch's records get a dozen columns at once, their place looked up once."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(rows) and rows.min() >= self.base:
            at = rows - self.base
            for name, values in columns.items():
                self.data[name][at] = values
            return
        for name, values in columns.items():
            self.put(name, rows, values)

    def take(self, names, rows):
        """{name: values at ``rows``} for the columns ``names``.  Where ``rows`` are one
        run of records, as the tables and lines of records in capture order ask for
        them, each column is sliced: views (not to be written to) within the rows in
        memory or one chunk on file, one copy of the slices where the run crosses a
        few chunks (no more than the files keep loaded); other rows are gathered."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        pieces = self._pieces(rows)
        if pieces is not None and len(pieces) == 1:
            arrays, start, stop = pieces[0]
            return {name: arrays[name][start:stop] for name in names}
        if pieces is not None and len(pieces) <= CACHED:
            return {name: np.concatenate([arrays[name][start:stop]
                                          for arrays, start, stop in pieces])
                    for name in names}
        here = rows >= self.base
        if here.all():
            return {name: self.data[name][rows - self.base] for name in names}
        out = {name: np.empty(len(rows), dtype=self.spec[name][0]) for name in names}
        for name in names:
            out[name][here] = self.data[name][rows[here] - self.base]
        old = np.flatnonzero(~here)
        chunks = rows[old] // self.files.rows
        for chunk in distinct(chunks).tolist():
            at = old[chunks == chunk]
            arrays = self.files.load(chunk)
            for name in names:
                out[name][at] = arrays[name][rows[at] - chunk * self.files.rows]
        return out

    def _pieces(self, rows):
        """[(arrays, start, stop)] whose slices, one after the other, hold ``rows`` when
        they are consecutive (a piece in memory, one per chunk on file), else None."""
        if not len(rows) or rows[-1] - rows[0] != len(rows) - 1 or not (np.diff(rows) == 1).all():
            return None
        pieces, at, end = [], int(rows[0]), int(rows[-1]) + 1
        while at < end:
            if at >= self.base:
                pieces.append((self.data, at - self.base, end - self.base))
                break
            chunk = at // self.files.rows
            first = chunk * self.files.rows
            stop = min(end, first + self.files.rows)
            pieces.append((self.files.load(chunk), at - first, stop - first))
            at = stop
        return pieces

    def row(self, i):
        """Row ``i``, its values read as they are looked at (a record looked at alone
        reads a few of its columns, and makes no arrays)."""
        return Row(*self._holding(int(i)))

    def get(self, name, i):
        columns, at = self._holding(int(i))
        return columns[name][at]

    def _holding(self, i):
        """The columns holding row ``i`` (in memory, or its chunk's, loaded once for the
        rows around it) and its place in them."""
        if i >= self.base:
            return self.data, i - self.base
        chunk = i // self.files.rows
        return self.files.load(chunk), i - chunk * self.files.rows

    def scan(self, names):
        """(first row, {name: values}) of each chunk on disk, then of the rows in memory."""
        files = self.files
        for chunk in range(files.count if files is not None else 0):
            yield chunk * files.rows, files.load(chunk, names)
        yield self.base, {name: self.data[name][:self.n - self.base] for name in names}

    def __getitem__(self, name):
        """The whole column (read back from the chunks where there are some)."""
        mine = self.data[name][:self.n - self.base]
        if not self.base:
            return mine
        return np.concatenate([self.files.load(chunk, (name,))[name]
                               for chunk in range(self.files.count)] + [mine])


class Row(Mapping):
    """One row of the columns: ``row[name]`` is the column's value there."""

    __slots__ = ("columns", "at")

    def __init__(self, columns, at):
        self.columns, self.at = columns, at

    def __getitem__(self, name):
        return self.columns[name][self.at]

    def __iter__(self):
        return iter(self.columns)

    def __len__(self):
        return len(self.columns)
