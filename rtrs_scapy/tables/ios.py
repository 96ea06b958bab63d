"""The ``ios`` table, written while the capture is read.

The analyzer hands IO rows (analysis/iorows.py) to a sink in batches, once each
request's fate is known.  :class:`IoWriter` is that sink: it gathers batches
(:data:`GATHER` at a time into one set of columns), holds one row group back
(:data:`HELD_GROUPS`) and writes the one before it to Parquet, row groups of exactly
``row_group_rows`` rows but the last, so memory stays flat whatever the size of the
capture.  Names (session, sess_uuid, device) are the ones the analyzer knows when a
row group is written: the row group held back names a device whose OPEN reply came
just after its first IOs.  A name learnt later still (a path tied to its handshake
at the end) would leave earlier rows without it, so ``close()`` compares the names
used with the final ones and rewrites the file, one row group at a time, only when
they differ.
"""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis import iorows, split
from ..analysis.rnbd import kind_name
from ..engine.distinct import distinct_inverse
from ..spec.constants import RNBD_OP_FLUSH, errno_name, rnbd_op_name
from .arrays import by_key, lookup, nullable, repeated, taken
from .encoding import Encoder, arriving
from .names import PATH_COLUMNS, Names
from .schema import TIME, schema

ROW_GROUP_ROWS = 1 << 14     # rows per row group: each is built whole in memory (numpy, Arrow, Parquet pages)
#: row groups of IO rows held back before they are named and written: a device's name
#: learnt a little after its first IO (its OPEN reply behind the IO already in flight)
#: names them, without writing the file again at the end
HELD_GROUPS = 1
#: batches gathered into one set of columns as they come: many short sessions hand over
#: thousands of batches of a few rows, whose small arrays would cost more than their
#: rows, and leave the heap in holes when written
GATHER = 64
_OPS = pa.array(["read", "write"])            # iorows op 1, 2
_OUTCOMES = pa.array(list(iorows.OUTCOMES))
_SCHEMA = schema("ios")


def path_columns(path_ids, names):
    """The path name columns (PATH_COLUMNS) of rows with these path ids, and the
    names used per path id."""
    uniq, inverse = distinct_inverse(path_ids)
    per_path = {p: names.path(p) for p in uniq.tolist()}
    inverse = inverse.reshape(-1)
    columns = {column: taken([per_path[p][k] for p in uniq.tolist()], inverse)
               for k, column in enumerate(PATH_COLUMNS)}
    return columns, per_path


def device_column(path_ids, device_ids, names):
    """Device names of rows (null without a device id), and the names used by
    (path id, device id)."""
    paths, path_at = distinct_inverse(np.asarray(path_ids, dtype=np.int64))
    devices, device_at = distinct_inverse(np.asarray(device_ids, dtype=np.int64))
    # a (path, device) pair as one small number (a batch has a few): not a 64-bit key,
    # whose distinct values would take a sort of every row
    pair = path_at.reshape(-1) * len(devices) + device_at.reshape(-1)

    def key(k):
        """(path id, device id as the wire's u32) of a pair."""
        return int(paths[k // len(devices)]), int(devices[k % len(devices)]) & 0xFFFFFFFF

    def name(k):
        path, device = key(k)
        return names.device(path, device) if device != 0xFFFFFFFF else None
    column, named = by_key(pair, name)
    return column, {key(k): v for k, v in named.items() if key(k)[1] != 0xFFFFFFFF}


def arrow_rows(rows, capture, names):
    """A batch of IO rows as an Arrow table of the ``ios`` schema, and the names it
    used: {("path", id): names, ("device", path id, device id): name}."""
    n = len(rows["frame"])
    path = rows["path"]
    path_cols, per_path = path_columns(path, names)
    device_id = rows["device_id"]
    devices, per_device = device_column(path, device_id, names)
    used = {("path", p): known for p, known in per_path.items()}
    used.update((("device",) + key, name) for key, name in per_device.items())
    rnbd_op = rows["rnbd_op"]
    is_io = rnbd_op >= 0
    rnbd_type = rows["rnbd_type"]
    answered = rows["outcome"] == iorows.ANSWERED
    errno = rows["errno"]
    response = rows["response_frame"] >= 0
    columns = {
        "capture": repeated(capture, n),
        "frame": pa.array(rows["frame"]),
        "first_frame": nullable(rows["first_frame"], rows["first_frame"] < 0),
        "time": pa.array(rows["time_ns"], TIME),
        **path_cols,
        "path_id": pa.array(path.astype(np.int32)),
        "cid": nullable(rows["cid"].astype(np.int32), rows["cid"] < 0),
        "op": lookup(_OPS, rows["op"] - 1),
        "buf_id": pa.array(rows["buf_id"].astype(np.int32)),
        "bytes": pa.array(rows["bytes"]),
        "partial": pa.array(rows["partial"] != 0),
        "rnbd_msg": by_key(rnbd_type, kind_name, rnbd_type < 0)[0],
        "rnbd_op": by_key(rnbd_op, rnbd_op_name, ~is_io)[0],
        "device_id": nullable(device_id.astype(np.int32), device_id < 0),
        "device": devices,
        "sector": nullable(rows["sector"], ~is_io | (rnbd_op == RNBD_OP_FLUSH)),
        "bi_size": nullable(rows["bi_size"], ~is_io),
        "outcome": lookup(_OUTCOMES, rows["outcome"]),
        "response_frame": nullable(rows["response_frame"], ~response),
        "response_time": pa.array(rows["response_ns"], TIME, mask=~response),
        "latency_us": nullable(rows["latency_ns"] / 1e3, rows["latency_ns"] < 0),
        "errno": nullable(errno.astype(np.int32), ~answered),
        "errno_name": by_key(errno, lambda e: errno_name(e) if e else None, ~answered)[0],
        "failover_from": nullable(rows["failover_from"], rows["failover_from"] < 0),
        "failover_of": nullable(rows["failover_of"], rows["failover_of"] < 0),
        "failed_over": pa.array(rows["failed_over"] != 0),
        "delivered": pa.array(rows["delivered"] == 1, mask=rows["delivered"] < 0),
    }
    for part, values in split.parts_ns(rows).items():
        columns[part + "_us"] = nullable(values / 1e3, values < 0)
    return pa.Table.from_pydict(columns, schema=arriving(_SCHEMA, columns)), used


class IoWriter:
    """The analyzer's IO sink: row groups of the ``ios`` table into one Parquet file.

    Use as ``analyze(..., io_sink=writer)``; the analyzer calls ``bind_analyzer(analyzer)``
    first (so that rows are named as they are written), then the writer with
    each batch; ``close(names)`` after the analysis (``Names(analyzer)``, or
    ``KnownNames(analyzer)`` kept apart from it)."""

    def __init__(self, path, capture, row_group_rows=ROW_GROUP_ROWS):
        self.path = os.fspath(path)
        self.capture = capture
        self.row_group_rows = row_group_rows
        self.names = Names()
        self.pending = []           # batches (gathered, or as they came), oldest first
        self.arriving = []          # the batches since the last gathering
        self.pending_rows = 0
        self.rows = 0
        self.used = {}           # name key -> set of the names written for it
        self.writer = Encoder(self.path, "ios")

    def bind_analyzer(self, analyzer):
        self.names = Names(analyzer)

    def name_by(self, names):
        """Name the rows still to come by ``names`` (the writer lets go of the analyzer)."""
        self.names = names

    def __call__(self, batch):
        size = len(batch["frame"])
        if not size:
            return
        self.arriving.append(batch)
        self.pending_rows += size
        if len(self.arriving) >= GATHER:
            self._gather()
        while self.pending_rows >= (HELD_GROUPS + 1) * self.row_group_rows:
            self._write_oldest()

    def _gather(self):
        if self.arriving:
            self.pending.append(_joined(self.arriving))
            self.arriving = []

    def _write_oldest(self):
        """The oldest rows, a row group of them, named and written: joined from the
        batches they are in, the others left as they are (joining all that waits, then
        copying what stays, made the analysis' memory peak at 10 M short-session
        packets).  The batches since the last gathering join the group as they are:
        gathered first, their rows were copied twice."""
        self.pending += self.arriving
        self.arriving = []
        group, need = [], self.row_group_rows
        while need:
            batch = self.pending[0]
            size = len(batch["frame"])
            if size <= need:
                group.append(self.pending.pop(0))
            else:
                group.append({name: column[:need] for name, column in batch.items()})
                self.pending[0] = {name: column[need:] for name, column in batch.items()}
            need -= min(size, need)
        self.pending_rows -= self.row_group_rows
        self._write(_joined(group))

    def flush(self):
        self._gather()
        if self.pending:
            rows, self.pending, self.pending_rows = _joined(self.pending), [], 0
            self._write(rows)

    def _write(self, rows):
        table, used = arrow_rows(rows, self.capture, self.names)
        for key, name in used.items():
            self.used.setdefault(key, set()).add(name)
        self.writer.write(table, row_group_size=self.row_group_rows)
        self.rows += table.num_rows

    def close(self, final):
        """Write what is left; name earlier rows again if a name became known later:
        ``final`` answers as :class:`Names` does at the end (names.py)."""
        self.flush()
        self.writer.close()
        stale = any(names != {final.path(key[1]) if key[0] == "path"
                              else final.device(key[1], key[2])}
                    for key, names in self.used.items())
        if stale:
            self._rename(final)
        return self.rows

    def abandon(self):
        """The analysis failed: no file."""
        try:
            self.writer.close()
        finally:
            os.remove(self.path)

    def _rename(self, names):
        """Rewrite the file with the final names, one row group at a time."""
        source = pq.ParquetFile(self.path)
        fresh = self.path + ".renamed"
        writer = Encoder(fresh, "ios")
        try:
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                writer.write(_renamed(table, names), row_group_size=self.row_group_rows)
        finally:
            writer.close()
        source.close()
        os.replace(fresh, self.path)


def _joined(batches):
    return iorows.concat(batches) if len(batches) > 1 else batches[0]


def _renamed(table, names):
    """A row group of the ``ios`` table with the names of ``names``."""
    path = table.column("path_id").to_numpy()
    columns, _ = path_columns(path, names)
    columns["device"], _ = device_column(
        path, table.column("device_id").fill_null(-1).to_numpy(), names)
    for column, values in columns.items():
        table = table.set_column(table.schema.get_field_index(column), column, values)
    return table
