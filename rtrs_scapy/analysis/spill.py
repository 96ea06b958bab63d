"""Chunks of the message records' columns on disk, with the writes that came after
them (docs/messages.md#memory); lists of Python values on disk beyond their newest
(the records' decoded fields, the report's session summaries: docs/report.md, the
IO rows iostat and the report keep: iorows.py).

A capture of millions of messages would hold every record until the end (the
lines are formatted once the sessions are named).  Kept in memory they cost
~150 bytes a record; here the oldest rows go to a temporary folder, a chunk of
rows per file (the columns one after the other: one column is read back alone),
and the few writes that reach a row after it left (a late response's pairing, an
invalidation, failover marks, a path named at the end) are kept as patches,
applied in the order they came whenever the chunk is read back.  A chunk with
many patches is rewritten with them (the patches held stay bounded).

The folder is made in ``tempfile``'s default place (TMPDIR) on the first spill
and deleted when the records go, at exit, also after an error or Ctrl-C.
"""

import mmap
import os
import pickle
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from ..capture import CaptureError

#: chunks kept loaded while reading back (frame order runs through one or two)
CACHED = 4


class ChunkFiles:
    """Chunks of ``rows`` rows of ``spec``'s columns (name -> (dtype, default)),
    numbered from 0 in the order they are written."""

    def __init__(self, spec, rows):
        self.spec = spec
        self.rows = rows
        self.count = 0
        self.folder = None
        self.patches = {}           # chunk -> [(name, rows in chunk, values)], in order
        self.patched = {}           # chunk -> rows patched (counted with repeats)
        self.cache = OrderedDict()  # chunk -> {name: array}, patched
        self.writer = None          # the thread that writes new chunks
        self.writing = None         # the chunk it is writing (a future), or None
        self.offsets, at = {}, 0    # where each column starts in a chunk's file
        for name, (dtype, _) in spec.items():
            self.offsets[name] = at
            at += np.dtype(dtype).itemsize * rows
        self.size = at

    def _path(self, chunk):
        return os.path.join(self.folder.name, "%d.bin" % chunk)

    def write(self, arrays):
        """New chunks (a multiple of ``self.rows`` rows of every column, arrays no one
        writes to again), written on a thread of its own while the caller goes on (one
        system call a chunk: the thread holds the GIL for a few lines only).  An error
        comes out of the next call."""
        if self.folder is None:
            # imported at the first spill: 3 ms (logging) that a command keeping no
            # message records never needs
            from concurrent.futures import ThreadPoolExecutor
            self.folder = _folder()
            self.writer = ThreadPoolExecutor(1, thread_name_prefix="rtrs-spill")
        self.wait()
        count = len(next(iter(arrays.values()))) // self.rows
        self.writing = self.writer.submit(self._save_all, self.count, arrays, count)
        self.count += count

    def _save_all(self, first, arrays, count):
        for k in range(count):
            self._save(first + k, {name: column[k * self.rows:(k + 1) * self.rows]
                                   for name, column in arrays.items()})

    def wait(self):
        """Until the chunk in writing is on disk."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def finish(self):
        """Every chunk on disk and the writing thread gone (before a fork: no thread
        is copied into the workers, docs/messages.md)."""
        if self.writer is not None:
            try:
                self.wait()
            finally:
                self.writer.shutdown()
                self.writer = None

    def _save(self, chunk, arrays):
        """The chunk's file, written anew beside and renamed over the old one: a chunk
        read back maps its file (``load``), whose mapping a file cut short in place
        would leave without its pages."""
        path = self._path(chunk)
        with _writing(self.folder, path + ".new") as out:
            _write_all(out.fileno(), [np.ascontiguousarray(arrays[name]).data
                                      for name in self.spec])
        os.replace(path + ".new", path)

    def patch(self, name, rows, values):
        """Writes to rows already written (``rows``: row numbers from the first chunk's)."""
        self.wait()
        chunks = rows // self.rows
        for chunk in np.unique(chunks).tolist():
            mine = chunks == chunk
            local = rows[mine] - chunk * self.rows
            self.patches.setdefault(chunk, []).append((name, local, values[mine].copy()))
            self.patched[chunk] = self.patched.get(chunk, 0) + len(local)
            self.cache.pop(chunk, None)
            if self.patched[chunk] > self.rows // 4:
                self._save(chunk, self.load(chunk))
                del self.patches[chunk], self.patched[chunk]

    def load(self, chunk, names=None):
        """The columns ``names`` (all: None) of a chunk, patched."""
        self.wait()
        cached = self.cache.get(chunk)
        if cached is not None:
            self.cache.move_to_end(chunk)
            return cached
        with open(self._path(chunk), "rb") as stored:
            if names is None:     # mapped (copy on write: the patches), not read: the
                # system maps the cached pages, a copy into fresh memory faulted each in
                raw = mmap.mmap(stored.fileno(), 0, access=mmap.ACCESS_COPY)
                arrays = {name: np.frombuffer(raw, dtype, self.rows, self.offsets[name])
                          for name, (dtype, _) in self.spec.items()}
            else:
                arrays = {}
                for name in names:
                    stored.seek(self.offsets[name])
                    arrays[name] = np.fromfile(stored, self.spec[name][0], self.rows)
        for name, local, values in self.patches.get(chunk, ()):
            if name in arrays:
                arrays[name][local] = values
        if names is None:
            self.cache[chunk] = arrays
            while len(self.cache) > CACHED:
                self.cache.popitem(last=False)
        return arrays


class SpilledList:
    """A list of Python values appended to in order (the message records' decoded
    fields, the report's session summaries), of which the newest ``2 * rows`` stay in
    memory and the older ones go to files, ``rows`` values a file (pickled).  A value
    set again after its file was written is kept in memory in its place (the
    failovers' late marks, a few).  ``what`` names the values in the error of a full
    disk.  A value read back is a copy, kept while its file is among the CACHED last
    read: what a reader changes in it is not kept."""

    def __init__(self, rows, what="the message records"):
        self.rows = rows
        self.what = what
        self.base = 0               # the index of the first value held in memory
        self.held = []
        self.folder = None
        self.later = {}             # index -> value set after it left
        self.cache = OrderedDict()  # chunk -> its values, read back

    def __len__(self):
        return self.base + len(self.held)

    def append(self, value):
        if len(self.held) >= 2 * self.rows:
            if self.folder is None:
                self.folder = _folder()
            with _writing(self.folder, self._path(self.base // self.rows),
                          self.what) as out:
                pickle.dump(self.held[:self.rows], out, pickle.HIGHEST_PROTOCOL)
            del self.held[:self.rows]
            self.base += self.rows
        self.held.append(value)

    def __getitem__(self, i):
        if i >= self.base:
            return self.held[i - self.base]
        if i in self.later:
            return self.later[i]
        chunk = i // self.rows
        values = self.cache.get(chunk)
        if values is None:
            with open(self._path(chunk), "rb") as stored:
                values = self.cache[chunk] = pickle.load(stored)
            while len(self.cache) > CACHED:
                self.cache.popitem(last=False)
        return values[i - chunk * self.rows]

    def __setitem__(self, i, value):
        if i >= self.base:
            self.held[i - self.base] = value
        else:
            self.later[i] = value

    def _path(self, chunk):
        return os.path.join(self.folder.name, "fields-%d.pickle" % chunk)


def _folder():
    """The temporary folder of what a command keeps on disk (deleted when it goes)."""
    import tempfile     # (only where something is kept on disk: it costs a start 7 ms)
    return tempfile.TemporaryDirectory(prefix="rtrs-spill-")


def _write_all(fd, buffers):
    """``buffers`` one after the other into the file ``fd``, in as few system calls as
    the system takes (one, but for a short write)."""
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views:
            views[0] = views[0][written:]


@contextmanager
def _writing(folder, path, what="the message records"):
    """A file of ``folder`` open for writing; a failed write (a full disk) deletes the
    folder and stops the analysis (or the command) with one line, naming ``what`` it
    could not keep."""
    try:
        with open(path, "wb") as out:
            yield out
    except OSError as exc:
        name = folder.name
        folder.cleanup()       # the analysis ends here: nothing to read back
        raise CaptureError("cannot keep %s in %s (TMPDIR): %s" % (
            what, name, exc.strerror or exc)) from None
