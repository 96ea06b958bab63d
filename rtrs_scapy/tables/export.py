"""``export``: a capture's tables as Parquet files in a folder.

Layout: ``DIR/<table>/<capture>-<hash>.parquet``, one folder per table, so
that a folder is a table for DuckDB (``read_parquet('DIR/ios/*.parquet')``),
Spark, Trino or pandas, and exports of several captures into the same DIR add
up (the ``capture`` column tells them apart; exporting a capture again replaces
its own files).
"""

import gc
import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor

from . import build
from .encoding import Encoder
from .ios import IoWriter
from .names import KnownNames
from .schema import TABLES


def capture_name(inputs):
    """The ``capture`` column: the argument as given, or the arguments joined by ', '."""
    if isinstance(inputs, (str, os.PathLike)):
        return os.fspath(inputs)
    return ", ".join(os.fspath(p) for p in inputs)


def file_stem(capture):
    """A file name for a capture's part of each table: readable and unique."""
    first = os.path.basename(capture.split(", ")[0].rstrip("/"))
    first = "stdin" if first in ("", "-") else first
    first = re.sub(r"(\.gz)?$", "", first)
    first = re.sub(r"\.(pcapng|pcap|cap|erf)$", "", first)
    first = re.sub(r"[^A-Za-z0-9_.-]+", "_", first) or "capture"
    digest = hashlib.sha1(capture.encode()).hexdigest()[:8]
    return "%s-%s" % (first, digest)


class Export:
    """What an export wrote: rows and file per table, and the message records (when
    the ``messages`` table was asked for).  The rest of the analysis is let go before
    the messages are written: the tables hold what it found."""

    def __init__(self, capture, messages):
        self.capture = capture
        self.messages = messages
        self.rows = {}
        self.files = {}


def export(inputs, out_dir, tables=TABLES, analyze=None, queue_depth=None, progress=None):
    """Write ``tables`` of the capture ``inputs`` (a path, or several: one capture)
    into ``out_dir``; returns an :class:`Export`.

    ``analyze(inputs, keep_messages, queue_depth, io_sink, progress, keep_latencies)``
    runs the analysis (default: ``rtrs_scapy.analysis.analyze``; the parallel runners
    of ``rtrs_scapy.analysis.parallel`` fit here): of the latencies, the paths' only,
    as the tables hold no RNBD view's latency and no queue figure."""
    from ..analysis import PATH_LATENCIES
    if analyze is None:
        from ..analysis import analyze
    capture = capture_name(inputs)
    stem = file_stem(capture)
    target = {}
    for table in tables:
        os.makedirs(os.path.join(out_dir, table), exist_ok=True)
        target[table] = os.path.join(out_dir, table, stem + ".parquet")
    writer = IoWriter(target["ios"] + ".partial", capture) if "ios" in tables else None
    try:
        result = analyze(inputs, keep_messages="messages" in tables, queue_depth=queue_depth,
                         io_sink=writer, progress=progress, keep_latencies=PATH_LATENCIES)
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise
    made, summary = build.summary_tables(result, capture, tables)
    names, path_ids = KnownNames(result.analyzer), build.path_ids(result.analyzer)
    done = Export(capture, result.messages if "messages" in tables else None)
    if writer is not None:
        writer.name_by(names)
    del result
    gc.collect()    # the analysis' state (in cycles) goes before the messages are built
    with ThreadPoolExecutor(1) as renaming:     # the IO rows named again meanwhile
        if writer is not None:
            closing = renaming.submit(writer.close, names)
            done.files["ios"] = target["ios"]
        written = [table for table in tables if table in made or table == "messages"]
        done.files.update((table, target[table]) for table in written)
        # the messages last: the summary's tables are written and let go before
        for table in sorted(written, key=lambda table: table == "messages"):
            if table in made:
                pieces = [made.pop(table)]
            else:
                pieces = build.message_pieces(done.messages, capture, summary, path_ids)
            done.rows[table] = _write(target[table], table, pieces)
        if writer is not None:
            done.rows["ios"] = closing.result()
            os.replace(writer.path, target["ios"])
    return done


def _write(path, table, pieces):
    """Arrow tables into one Parquet file (a row group each, encoded while the next is
    made: encoding.py); the row count."""
    rows = 0
    encoder = Encoder(path + ".partial", table)
    try:
        for piece in pieces:
            encoder.write(piece)
            rows += piece.num_rows
            del piece
    finally:
        encoder.close()
    os.replace(path + ".partial", path)
    return rows
