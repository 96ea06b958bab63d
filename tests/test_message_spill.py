"""The message records beyond the newest chunks kept on disk (analysis/columns.py,
analysis/spill.py): what is read back is what was written, writes that come late
included; ``messages`` and ``export`` say the same of a spilled capture as of one
held in memory; a full disk is a one-line error; the records kept in memory do not
grow with the capture."""

import errno
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest

from conftest import real_pcap
from cli_run import run
from rtrs_scapy.analysis import analyze, columns, spill
from rtrs_scapy.analysis.columns import HELD, Columns
from rtrs_scapy.analysis.records import Records
from rtrs_scapy.engine import ROWS
from rtrs_scapy.engine import transport as T
from rtrs_scapy.report import forked
from rtrs_scapy.report.message_lines import MessageLines
from rtrs_scapy.report.messages import MessageView
from rtrs_scapy.tables.build import messages_tables

SPEC = {"a": (np.int64, -1), "b": (np.float64, 0.0), "c": (np.int16, 0)}


def test_columns_read_back_what_was_written():
    """Appends, writes to any row (spilled ones too, some rewriting their chunk), one
    column or several at once, and reads, against a plain numpy table doing the same."""
    rng = np.random.default_rng(7)
    cols = Columns(SPEC, chunk=4)
    plain = {name: np.zeros(0, dtype=dtype) for name, (dtype, _) in SPEC.items()}
    for _ in range(200):
        count = int(rng.integers(1, 7))
        start = cols.extend(count)
        for name, (dtype, default) in SPEC.items():
            plain[name] = np.append(plain[name], np.full(count, default, dtype=dtype))
            values = rng.integers(0, 1000, count).astype(dtype)
            cols.data[name][start - cols.base:start - cols.base + count] = values
            plain[name][start:start + count] = values
        rows = rng.integers(0, len(cols), 3)
        for name, (dtype, _) in SPEC.items():
            values = rng.integers(0, 1000, 3).astype(dtype)
            cols.put(name, rows, values)
            plain[name][rows] = values
        cols.put("a", int(rows[0]), 5)
        plain["a"][rows[0]] = 5
        # several columns at once (a batch's records), the newest rows or any
        rows = rng.integers(max(0, len(cols) - 4) if rng.integers(2) else 0, len(cols), 3)
        values = {"a": rng.integers(0, 1000, 3), "b": 2.5, "c": rng.integers(0, 9, 3)}
        cols.put_columns(rows, values)
        for name, value in values.items():
            plain[name][rows] = value
    assert cols.base > 0 and cols.files.count > 10
    everything = np.arange(len(cols))
    rng.shuffle(everything)
    got = cols.take(SPEC, everything)
    for name in SPEC:
        assert np.array_equal(got[name], plain[name][everything]), name
        assert np.array_equal(cols[name], plain[name]), name
        assert np.array_equal(np.concatenate([part[name] for _, part in cols.scan(SPEC)]),
                              plain[name]), name
    assert cols.row(3) == {name: plain[name][3] for name in SPEC}
    # runs of consecutive rows (read as views): in memory, in one chunk on file, across
    # chunks and across the last chunk on file and the rows in memory
    for first, count in [(len(cols) - 5, 5), (8, 3), (8, 4), (6, 5), (cols.base - 2, 4),
                         (0, len(cols)), (5, 1)]:
        got = cols.take(SPEC, np.arange(first, first + count))
        for name in SPEC:
            assert np.array_equal(got[name], plain[name][first:first + count]), (first, name)


def test_chunks_are_written_by_a_thread_that_ends_with_the_records(monkeypatch):
    """Each chunk is written on the files' thread from arrays the rows no longer use
    (the columns read back what was written while the rows went on), and that thread
    is gone once the writing is finished: none is copied into a forked worker."""
    writers, save = [], spill.ChunkFiles._save

    def recorded(files, chunk, arrays):
        writers.append(threading.current_thread().name)
        return save(files, chunk, arrays)
    monkeypatch.setattr(spill.ChunkFiles, "_save", recorded)
    cols = Columns(SPEC, chunk=4)
    for start in range(0, 60, 3):
        at = cols.extend(3) - cols.base
        for name in SPEC:
            cols.data[name][at:at + 3] = np.arange(start, start + 3)
    assert cols.files.count > 10 and set(writers) == {"rtrs-spill_0"}
    cols.finish()
    assert not [t for t in threading.enumerate() if t.name.startswith("rtrs-spill")]
    for name in SPEC:
        assert np.array_equal(cols[name], np.arange(60).astype(SPEC[name][0])), name


def test_a_summary_never_loads_the_spill_s_thread_pool():
    """A command that keeps no message records never spills: the thread pool's import
    (concurrent.futures and logging, 3 ms of every start) waits for the first spill."""
    code = ("import sys; from rtrs_scapy.cli import main; sys.argv[0] = 'rtrs-dissect'\n"
            "try:\n    main(['summary', '-q', %r])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('concurrent.futures', 'logging') if m in sys.modules),"
            " file=sys.stderr)" % str(real_pcap("basic_inval")))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr.splitlines()[-1] == "[]", done.stderr


def test_a_spilled_list_reads_back_what_was_appended_and_set():
    """The rich records' decoded fields (spill.SpilledList): appends, values set again
    before and after their file was written, and reads in any order, against a list."""
    rng = np.random.default_rng(11)
    spilled, plain = spill.SpilledList(3), []
    for k in range(200):
        value = ("fields", k, {"qpn": k * 7}, None if k % 3 else (("a",), (k,)))
        spilled.append(value)
        plain.append(value)
        at = int(rng.integers(0, len(plain)))
        spilled[at] = plain[at] = ("marked", at)
        assert spilled[at] == plain[at]
    assert spilled.base > 150 and spilled.later
    assert len(spilled) == len(plain)
    order = list(range(len(plain)))
    rng.shuffle(order)
    assert [spilled[i] for i in order] == [plain[i] for i in order]


@pytest.fixture(scope="module")
def failover_runs():
    """The real failover capture (24 k records) analysed with its records in memory and
    with chunks of 64 records on disk."""
    return {chunk: analyze(real_pcap("failover"), keep_messages=True, message_chunk=chunk)
            for chunk in (None, 64)}


def _outputs(result):
    view = MessageView(result.summary, result.messages)
    out = {fmt: b"".join(MessageLines(view, result.messages).serial(fmt)).decode().split("\n")
           for fmt in ("text", "json")}
    out["table"] = [row for table in messages_tables(result, "failover")
                    for row in table.to_pylist()]
    return out


def test_address_ids_are_numbered_in_the_order_the_addresses_come():
    """A batch's records take their address ids from a table looked up row by row
    (engine/record_columns.py), the addresses it does not hold numbered by a second
    pass: the ids are those one look-up per address gives, new ones numbered in the
    order of their first row, a batch's sources before its destinations; also where one low
    half sits under two high ones (an IPv4-mapped address and an IPv6 one), across
    the table's growth (300 addresses), and for addresses numbered apart from rows
    (a CM record's, ``addr_id``) that rows name later."""
    class Texts:
        text = staticmethod(lambda raw: "%x/%x" % raw)

    rng = np.random.default_rng(7)
    mapped, six = 0xFFFF, 0x2001_0DB8 << 32
    for highs in ((mapped,), (mapped, six)):
        lows = rng.integers(1, 1 << 32, 150)
        n = 2000
        addresses = {half: (rng.choice(highs, n), rng.choice(lows, n) + (n * (half == "dst")))
                     for half in ("src", "dst")}
        rows = np.zeros((n, T.R_COLUMNS), dtype=np.int64)
        for half, (hi_col, lo_col) in (("src", (T.R_SRC_HI, T.R_SRC_LO)),
                                       ("dst", (T.R_DST_HI, T.R_DST_LO))):
            rows[:, hi_col], rows[:, lo_col] = addresses[half]
        records, reference = Records(Texts()), Records(Texts())
        early = (int(rows[1500, T.R_DST_HI]), int(rows[1500, T.R_DST_LO]))
        records.addr_id(early), reference.addr_id(early)
        for batch in (slice(0, 500), slice(500, n)):
            keep = np.arange(n)[batch]
            first = records.cols.extend(len(keep)) - records.cols.base
            records._write_rows(rows, keep, first)
            for half in ("src", "dst"):
                hi, lo = (column[batch] for column in addresses[half])
                expected = [reference.addr_id(raw) for raw in zip(hi.tolist(), lo.tolist())]
                assert records.cols.data[half][first:first + len(keep)].tolist() == expected
        assert records.addrs == reference.addrs and len(records.addrs) > 256
        assert records._known.count == len(records.addrs)      # all in the table now


def test_spilled_records_give_the_same_lines_and_rows(failover_runs):
    """``messages`` text and JSON lines and ``export``'s messages rows of a capture whose
    records went to disk, the failovers' late marks on spilled records among them,
    are those of the records held in memory."""
    held, spilled = failover_runs[None], failover_runs[64]
    records = spilled.analyzer.records
    assert records.cols.files.count > 300 and held.analyzer.records.cols.files is None
    assert records.rich.base > 0 and isinstance(held.analyzer.records.rich, list)
    late = [i for i, extra in records.extras.items()
            if {"failover_from", "failed_over_to", "not_delivered"} & set(extra)]
    assert late and all(i < records.cols.base for i in late)
    mine, theirs = _outputs(spilled), _outputs(held)
    assert mine == theirs
    marked = [json.loads(line) for line in mine["json"] if "failover_from" in line]
    assert marked and all("failover_from" in m["fields"] for m in marked)


def test_records_are_read_back_in_frame_order_piece_by_piece(failover_runs):
    """The closed records in frame order, a piece at a time (what pairs them by frame
    reads): every record in storage order, the order itself, or one with records left
    out; either way the records at ``order``, in its order."""
    records = failover_runs[64].analyzer.records
    names = ("msg", "frame", "paired")
    kept = records.order
    try:
        for order in (np.arange(len(records.cols)), kept, kept[1::3]):
            records.order = order
            pieces = list(records._in_order(names))
            assert [start for start, _ in pieces] == np.cumsum(
                [0] + [len(got["frame"]) for _, got in pieces[:-1]]).tolist()
            whole = records.cols.take(names, order)
            for name in names:
                assert np.array_equal(np.concatenate([got[name] for _, got in pieces]),
                                      whole[name]), name
    finally:
        records.order = kept


def test_forked_workers_write_what_one_process_formats(failover_runs, monkeypatch):
    """``messages`` formats the batches on every core, in forked workers
    (report/message_lines.py): their blocks, in order, are the lines one process
    makes, from records in memory and on disk alike."""
    monkeypatch.setattr(forked, "usable_cores", lambda: 3)
    for result in failover_runs.values():
        lines = MessageLines(MessageView(result.summary, result.messages), result.messages)
        for fmt in ("text", "json"):
            assert b"".join(lines.blocks(fmt)) == b"".join(lines.serial(fmt))


def test_blocks_come_in_order_from_every_process_and_a_lost_worker_costs_nothing(
        monkeypatch):
    """Three cores: this process makes every third block, two forked workers the others;
    a worker that fails (at block 4) leaves its blocks to this process, in order."""
    monkeypatch.setattr(forked, "usable_cores", lambda: 3)
    parent = os.getpid()

    def make(k):
        if k == 4 and os.getpid() != parent:
            raise RuntimeError("lost")
        return b"%d %d\n" % (k, os.getpid())

    made = [block.split() for block in forked.blocks(make, 10)]
    assert [int(k) for k, _ in made] == list(range(10))
    by = {int(k): int(pid) for k, pid in made}
    assert len(set(by.values())) == 3
    assert [k for k in by if by[k] == parent] == [0, 3, 4, 6, 7, 9]


def test_a_worker_s_pipe_holds_a_megabyte_where_the_system_allows_it(monkeypatch):
    """On Linux, the pipe a worker sends through is widened from 64 KiB to PIPE_BYTES
    (the limit fs.pipe-max-size sets a process without privileges); refused (a lower
    limit), the blocks still come, in order, through the system's own size."""
    import fcntl
    monkeypatch.setattr(forked, "usable_cores", lambda: 2)
    big = [bytes([k]) * (3 << 20) for k in range(4)]    # blocks larger than the pipe
    pid, stream = forked._fork(lambda k: big[k], [1, 3], {})
    try:
        assert fcntl.fcntl(stream.fileno(), fcntl.F_GETPIPE_SZ) == forked.PIPE_BYTES
        assert [forked._receive(stream) for _ in range(2)] == [big[1], big[3]]
    finally:
        stream.close()
        os.waitpid(pid, 0)

    def refused(fd, command, size):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(forked, "fcntl", refused)
    assert list(forked.blocks(lambda k: big[k], 4)) == big


def test_blocks_without_a_process_to_spare_are_made_here(monkeypatch):
    """Forking fails (a process limit): every block is made by this process, in order."""
    monkeypatch.setattr(forked, "usable_cores", lambda: 3)

    def no_process():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_process)
    parent = os.getpid()
    made = [block.split() for block in forked.blocks(lambda k: b"%d %d" % (k, os.getpid()), 9)]
    assert made == [[b"%d" % k, b"%d" % parent] for k in range(9)]


def test_what_stays_in_memory_does_not_grow_with_the_capture(failover_runs):
    """Of the spilled run, the rows in memory are the last HELD chunks' and the batch of
    messages the engine hands over, the chunks read back a few; the frame order and
    pairs by frame take 4 bytes a record each (where the columns take 160)."""
    records = failover_runs[64].analyzer.records
    cols = records.cols
    assert len(cols) > 20_000
    assert cols.n - cols.base <= HELD * 64 + ROWS
    assert len(cols.files.cache) <= spill.CACHED
    index = records.order.nbytes + sum(p.nbytes for p in records.partners())
    assert index <= 12 * len(cols)
    rich = records.rich      # the control messages' decoded fields: 4 a file
    assert rich.base > 0 and len(rich.held) <= 2 * rich.rows
    assert len(rich.cache) <= spill.CACHED


def test_a_full_disk_is_a_one_line_error(tmp_path, monkeypatch):
    """No room for the spilled records: one line naming the folder and the cause, no
    traceback, and the folder is gone."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(spill, "open", full, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(columns, "HELD", 2)      # its 20 k records spill at 16 k
    result = run("messages", real_pcap("failover"))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: cannot keep the message records in " + str(tmp_path))
    assert lines[-1].endswith("No space left on device")
    gc.collect()
    assert not os.listdir(tmp_path)


def test_a_full_disk_under_the_decoded_fields_is_a_one_line_error(tmp_path, monkeypatch):
    """The control messages' decoded fields find no room: the same one line (a
    CaptureError, which the commands print), and the folder is gone."""
    from rtrs_scapy.capture import CaptureError

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(spill, "open", full, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fields = spill.SpilledList(2)
    with pytest.raises(CaptureError, match=r"^cannot keep the message records in .*: "
                                           r"No space left on device$"):
        for k in range(5):
            fields.append(k)
    gc.collect()
    assert not os.listdir(tmp_path)
