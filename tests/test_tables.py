"""The tables (rtrs_scapy/tables): what DuckDB reads from an export equals what the
summary says and what the captures' truth.json says (the kernel's counters, the
test bed's maps and kernel log, the request and response immediates counted in
each real capture)."""

import json
import weakref
from collections import Counter

import duckdb  # noqa: F401  (the SQL tests need it installed, not skipped)
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap, real_truth
from test_cli_messages import IO_ERROR, mapped_devices
from test_inputs import frames_of
from ib_decode import bth_rows
from rtrs_scapy.analysis import analyze
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids
from rtrs_scapy.tables import build, docs, ios
from rtrs_scapy.tables.export import export
from rtrs_scapy.tables.ios import IoWriter
from rtrs_scapy.tables.names import Names
from rtrs_scapy.tables.schema import META_VERSION, SCHEMA_VERSION, TABLES, TIME, schema
from rtrs_scapy.tables.sql import connect

#: the crafted corpus: every capture with the crafter's truth beside it
CRAFTED = sorted(PROJECT_PCAPS / t.name[:-len(".truth.json")]
                 for t in PROJECT_PCAPS.glob("*.truth.json"))
CAPTURES = [path for _name, path, _truth in REAL_ALL] + CRAFTED


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """capture path -> (Export, DuckDB connection over its folder)."""
    done = {}

    def get(path):
        if path not in done:
            folder = tmp_path_factory.mktemp(path.name.split(".")[0])
            done[path] = (export(str(path), str(folder)), connect(str(folder)))
        return done[path]
    yield get
    for _, con in done.values():
        con.close()


def all_paths(summary):
    return [p for s in summary["sessions"] for p in s["paths"]]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(PROJECT_PCAPS)))
def test_ios_add_up_to_the_summary(exported, path):
    done, con = exported(path)
    paths = all_paths(analyze(path, keep_messages=False).summary)
    figures = {op: (n, b, lat, err) for op, n, b, lat, err in con.execute(
        "SELECT op, count(*), sum(bytes), count(latency_us), count(*) FILTER (errno <> 0) "
        "FROM ios GROUP BY op").fetchall()}
    for op in ("read", "write"):
        expected = (sum(p["io"][op]["count"] for p in paths),
                    sum(p["io"][op]["bytes"] for p in paths),
                    sum(p["latency_us"][op]["count"] for p in paths),
                    sum(p["io"][op]["errors"] for p in paths))
        assert figures.get(op, (0, None, 0, 0)) == (expected if expected[0] else
                                                   (0, None, 0, 0))
    # the rows name the failovers whose original is on the wire; the others are listed
    # apart (failovers_unseen, docs/PROTOCOL.md#failover-from-the-wire)
    seen = sum(p["failovers"] - p["failovers_unseen"] for p in paths)
    failovers = con.execute("SELECT count(*) FROM ios WHERE failover_from IS NOT NULL")
    assert failovers.fetchone()[0] == seen
    assert con.execute("SELECT count(*) FROM ios WHERE failover_of IS NOT NULL").fetchone()[0] \
        == con.execute("SELECT count(*) FROM ios WHERE failed_over").fetchone()[0] == seen


@pytest.mark.parametrize("path", CRAFTED, ids=lambda p: str(p.relative_to(PROJECT_PCAPS)))
def test_ios_per_path_equal_the_crafters_truth(exported, path):
    """Requests and bytes per path, counted like the kernel's stats/rdma."""
    truth = json.loads(path.with_name(path.name + ".truth.json").read_text())
    _, con = exported(path)
    got = {}
    for client, server, op, n, b in con.execute(
            "SELECT client, server, op, count(*), sum(bytes) FROM ios GROUP BY ALL").fetchall():
        got[(client, server, op)] = (n, b)
    want = {}
    for p in truth["paths"]:
        for op in ("read", "write"):
            n, b = p["stats"][op + "s"], p["stats"][op + "_bytes"]
            if n:
                key = (p["client_addr"], p["server_addr"], op)
                old = want.get(key, (0, 0))
                want[key] = (old[0] + n, old[1] + b)
    assert got == want


#: RTRS immediate types (the top 4 bits) as the test bed names them
IMM_KINDS = {0: "IO_REQ", 1: "IO_RSP", 2: "IO_RSP_W_INV", 8: "HB_MSG", 9: "HB_ACK"}


def retransmitted_immediates(pcap):
    """Per immediate kind, the frames tshark shows with a (destination, QP, PSN) already
    seen: RC retransmissions of one message (IBTA 9.7.5: a duplicate PSN is executed once
    by the responder and only acknowledged again), which the test bed's frame counts
    include.  failover.pcap: the server's response to frame 22117 (frame 22154) and its
    heartbeat (22753), each sent again 13 times to the client's dead NIC."""
    seen, again = set(), Counter()
    for row in bth_rows(pcap):
        if row.imm is None:
            continue
        key = (row.dst, row.destqp, row.psn)
        if key in seen:
            again[IMM_KINDS.get(row.imm >> 28)] += 1
        seen.add(key)
    return again


@pytest.mark.parametrize("name", [name for name, _, _ in REAL_ALL])
def test_ios_and_messages_count_the_immediates_of_the_capture(exported, name):
    """Requests and responses as the test bed counted their immediates in the capture,
    less the RC retransmissions tshark finds among those frames (one message each)."""
    counts = Counter(real_truth(name)["checks"]["pcap_rtrs_counts"])
    counts.subtract(retransmitted_immediates(real_pcap(name)))
    _, con = exported(real_pcap(name))
    assert con.execute("SELECT count(*) FROM ios").fetchone()[0] == counts["IO_REQ"]
    kinds = dict(con.execute("SELECT msg, count(*) FROM messages GROUP BY msg").fetchall())
    assert kinds["read"] + kinds["write"] == counts["IO_REQ"]
    assert kinds["io_rsp"] == counts["IO_RSP_W_INV"] + counts["IO_RSP"]
    for kind in ("INFO_REQ", "INFO_RSP", "HB_MSG", "HB_ACK"):
        assert kinds.get(kind.lower(), 0) == counts[kind]


@pytest.mark.parametrize("name", ["basic_inval", "basic_noinval", "discard", "jumbo", "load"])
def test_ios_equal_the_kernel_counters(exported, name):
    """stats/rdma read before the unmap: the RNBD CLOSE of the unmap is not in it."""
    truth = real_truth(name)
    (stats,) = truth["rtrs_stats"]["client"]["pre_unmap"].values()
    _, con = exported(real_pcap(name))
    rows = dict((op, (n, b)) for op, n, b in con.execute(
        "SELECT op, count(*), sum(bytes) FROM ios WHERE rnbd_msg IS DISTINCT FROM 'close' "
        "GROUP BY op").fetchall())
    assert rows["read"] == (stats["rdma"]["reads"], stats["rdma"]["read_bytes"])
    assert rows["write"] == (stats["rdma"]["writes"], stats["rdma"]["write_bytes"])
    closes = con.execute("SELECT count(*) FROM ios WHERE rnbd_msg = 'close'").fetchone()[0]
    assert closes == len(truth["unmaps"])


def test_failed_ios_are_the_kernels_io_errors(exported):
    """Device, sector and op of each failed IO row equal the client kernel's
    'I/O error, dev rnbdN, sector S op (OP)' lines; the failed OPEN is ENOENT."""
    truth = real_truth("errors")
    devices = mapped_devices(truth)
    logged = Counter()
    for line in truth["kernel_log"]["client"]:
        found = IO_ERROR.search(line)
        if found:
            logged[(devices[found.group(1)][1], int(found.group(2)), found.group(3))] += 1
    _, con = exported(real_pcap("errors"))
    failed = con.execute("SELECT device, sector, upper(rnbd_op) FROM ios "
                         "WHERE errno < 0 AND rnbd_msg = 'io'").fetchall()
    assert Counter(failed) == logged
    opens = con.execute("SELECT session, errno_name FROM ios WHERE rnbd_msg = 'open' "
                        "AND errno < 0").fetchall()
    missing = [sess for sess, path in devices.values() if path == "/dev/does_not_exist"]
    assert opens == [(missing[0], "ENOENT")]


def test_sessions_and_paths_by_name_and_uuid(exported):
    truth = real_truth("multipath")
    _, con = exported(real_pcap("multipath"))
    (session,) = con.execute("SELECT session, paths_uuid, path_count FROM sessions").fetchall()
    assert session[0] == truth["config"]["session"] and session[2] == truth["config"]["paths"]
    paths = con.execute("SELECT path_id, sess_uuid, client, server, queue_depth, "
                        "queue_depth_source, always_invalidate FROM paths ORDER BY path_id")
    paths = paths.fetchall()
    assert len(paths) == 2 and len({p[1] for p in paths}) == 2
    for _, _, client, server, depth, source, inval in paths:
        assert client in truth["config"]["client_ip"] and server in truth["config"]["server_ip"]
        assert (depth, source) == (truth["config"]["server_module_params"]["sess_queue_depth"],
                                   "handshake")
        assert inval is truth["config"]["always_invalidate"]
    # every IO row names its path as the paths table does
    joined = con.execute("SELECT count(*) FROM ios JOIN paths USING (path_id, sess_uuid, "
                         "client, server, session, paths_uuid)").fetchone()[0]
    assert joined == con.execute("SELECT count(*) FROM ios").fetchone()[0]


@pytest.mark.parametrize("path", [real_pcap("errors"), real_pcap("multipath"),
                                  PROJECT_PCAPS / "reconnect_timeout.pcap"],
                         ids=lambda p: str(p.relative_to(PROJECT_PCAPS)))
def test_events_are_the_summarys(exported, path):
    done, con = exported(path)
    expected = Counter((p["sess_uuid"], e["kind"], e["frame"])
                       for p in all_paths(analyze(path, keep_messages=False).summary)
                       for e in p["events"])
    assert expected
    got = Counter(con.execute("SELECT sess_uuid, kind, frame FROM events").fetchall())
    assert got == expected


def test_the_files_carry_the_schema(exported):
    done, _ = exported(real_pcap("basic_inval"))
    for table, name in done.files.items():
        written = pq.read_schema(name)
        assert written.equals(schema(table), check_metadata=False)
        assert written.metadata[META_VERSION].decode() == SCHEMA_VERSION
        for field in written:
            assert field.metadata[b"description"]
    assert pq.read_schema(done.files["ios"]).field("time").type == pa.timestamp("ns", "UTC")
    assert TIME == pa.timestamp("ns", tz="UTC")


def test_only_strings_and_narrow_numbers_are_dictionary_encoded(exported):
    """Frames, times, sectors, latencies and RNBD headers (JSON, with their sector) are
    nearly all distinct: their column chunks are written without a dictionary; names,
    message kinds, ids and the messages' fields with one."""
    done, _ = exported(real_pcap("basic_inval"))
    for table, wide, narrow in (("ios", ("frame", "time", "sector", "latency_us"),
                                 ("session", "op", "buf_id", "outcome")),
                                ("messages", ("frame", "time", "paired_frame", "rnbd"),
                                 ("msg", "src", "cid", "fields"))):
        group = pq.ParquetFile(done.files[table]).metadata.row_group(0)
        chunks = {group.column(k).path_in_schema: group.column(k)
                  for k in range(group.num_columns)}
        for name in wide:
            assert chunks[name].dictionary_page_offset is None, (table, name)
        for name in narrow:
            assert chunks[name].dictionary_page_offset is not None, (table, name)


def test_64_bit_integers_are_written_as_deltas(exported):
    """Frames, times, sectors and QPs (64-bit integers) are encoded as deltas, the
    latencies (floats) and narrow columns are not; DuckDB reads them back (below)."""
    done, _ = exported(real_pcap("basic_inval"))
    for table, deltas, others in (("ios", ("frame", "time", "sector"), ("latency_us", "op")),
                                  ("messages", ("frame", "time", "paired_frame", "dst_qpn"),
                                   ("latency_us", "msg", "cid"))):
        group = pq.ParquetFile(done.files[table]).metadata.row_group(0)
        chunks = {group.column(k).path_in_schema: group.column(k)
                  for k in range(group.num_columns)}
        for name in deltas:
            assert "DELTA_BINARY_PACKED" in chunks[name].encodings, (table, name)
        for name in others:
            assert "DELTA_BINARY_PACKED" not in chunks[name].encodings, (table, name)


def test_times_are_the_captures(exported):
    """The first request of basic_inval: frame 22, 2026-11-29T15:15:15.863726Z."""
    _, con = exported(real_pcap("basic_inval"))
    row = con.execute("SELECT frame, strftime(time, '%Y-%m-%dT%H:%M:%S.%fZ'), "
                      "epoch_ns(time) FROM ios ORDER BY frame LIMIT 1").fetchone()
    assert row == (22, "2026-11-29T15:15:15.863726Z", 1795965315863726000)
    assert con.execute("SELECT strftime(time, '%Y-%m-%dT%H:%M:%S.%fZ') FROM messages "
                       "WHERE frame = 22").fetchone() == ("2026-11-29T15:15:15.863726Z",)


def test_messages_table_has_every_record(exported):
    done, con = exported(real_pcap("errors"))
    records = done.messages
    got = con.execute("SELECT frame, msg, paired_frame FROM messages ORDER BY frame, msg")
    assert got.fetchall() == sorted((r["frame"], r["msg"], r["paired_frame"]) for r in records)
    # a response carries the RNBD columns of the request it answers
    row = con.execute("SELECT r.device_id, r.sector, q.frame FROM messages r JOIN messages q "
                      "ON q.frame = r.paired_frame WHERE r.msg = 'io_rsp' AND r.errno = -5 "
                      "ORDER BY r.frame LIMIT 1").fetchone()
    assert row[1] == 14336
    conn_rsp = con.execute("SELECT fields::JSON ->> 'queue_depth' FROM messages "
                           "WHERE msg = 'conn_rsp' LIMIT 1").fetchone()
    assert conn_rsp == (str(real_truth("errors")["protocol_expected"]["conn_rsp"]["queue_depth"]),)


def test_names_learnt_late_are_written_all_the_same(tmp_path):
    """A sink that does not see the analyzer names nothing while writing; closing
    names every row as the bound writer does."""
    pcap = str(real_pcap("errors"))
    tables = {}
    for bound in (True, False):
        writer = IoWriter(tmp_path / ("ios-%s.parquet" % bound), pcap, row_group_rows=4)
        sink = writer if bound else (lambda batch, w=writer: w(batch))
        result = analyze(pcap, keep_messages=False, io_sink=sink)
        writer.close(Names(result.analyzer))
        tables[bound] = pq.read_table(writer.path)
    truth = real_truth("errors")
    assert tables[True].num_rows == truth["checks"]["pcap_rtrs_counts"]["IO_REQ"]
    assert tables[True].equals(tables[False])
    rows = tables[True].select(["device_id", "device"]).to_pylist()
    assert all(r["device"] is not None for r in rows if r["device_id"] is not None)
    opened = {path for sess, path in mapped_devices(truth).values() if sess == "lab1"}
    assert {r["device"] for r in rows if r["device"]} == opened


@pytest.mark.parametrize("held, rewritten", [(0, True), (1, False)])
@pytest.mark.parametrize("pcap, rows", [(real_pcap("errors"), 16),
                                        (PROJECT_PCAPS / "reject_eexist.pcap", 4)])
def test_a_name_learnt_a_row_group_late_needs_no_rewrite(tmp_path, monkeypatch, pcap, rows,
                                                         held, rewritten):
    """The real errors capture in row groups of 16 rows (the crafted reject_eexist in 4):
    a device's name comes after the first row group's IOs are known.  Written at once,
    those rows are named again at the end, the whole file rewritten; held back one row
    group (ios.HELD_GROUPS), they are written named.  The rows are the same as written
    in one piece."""
    monkeypatch.setattr(ios, "HELD_GROUPS", held)
    rewrites = []
    rename = IoWriter._rename
    monkeypatch.setattr(IoWriter, "_rename",
                        lambda writer, names: rewrites.append(1) or rename(writer, names))
    pcap = str(pcap)
    tables = []
    for group in (rows, ios.ROW_GROUP_ROWS):
        writer = IoWriter(tmp_path / ("ios-%d.parquet" % group), pcap, row_group_rows=group)
        writer.close(Names(analyze(pcap, keep_messages=False, io_sink=writer).analyzer))
        tables.append(pq.read_table(writer.path))
    assert bool(rewrites) == rewritten
    assert tables[0].num_rows > rows and tables[0].equals(tables[1])
    assert set(tables[0].column("device").to_pylist()) - {None}


def test_docs_are_generated_from_the_schema():
    text = docs.DOC.read_text()
    assert docs.refreshed(text) == text
    for table in TABLES:
        assert "### %s" % table in text
        for field in schema(table):
            assert "| `%s` |" % field.name in text


def test_tables_of_another_major_version_are_refused(tmp_path):
    (tmp_path / "ios").mkdir()
    old = schema("ios").with_metadata({b"rtrs_scapy.table": b"ios",
                                       b"rtrs_scapy.schema_version": b"0.9"})
    pq.write_table(old.empty_table(), tmp_path / "ios" / "old.parquet")
    from rtrs_scapy.tables.sql import TablesError
    with pytest.raises(TablesError, match="schema version 1.x"):
        connect(str(tmp_path))


def test_a_folder_without_a_table_gives_an_empty_view(tmp_path):
    export(str(real_pcap("discard")), str(tmp_path), tables=("ios",))
    con = connect(str(tmp_path))
    assert con.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM ios").fetchone() == (25,)
    assert json.loads(con.execute("SELECT to_json(list(column_name)) FROM "
                                  "(DESCRIBE events)").fetchone()[0]) == \
        [f.name for f in schema("events")]


def test_summary_tables_made_a_session_at_a_time_are_the_whole(tmp_path, monkeypatch):
    """Three copies of the real basic_inval capture, each a session: the sessions,
    paths and events tables made a block of one session at a time equal those made
    at once, the events in time order across the sessions."""
    source = real_pcap("basic_inval")
    capture = tmp_path / "three.pcap"
    repeat_capture(source, capture, 3 * len(frames_of(source)), session_uuids(source))
    result = analyze(capture, keep_messages=False)
    wanted = ("sessions", "paths", "events")
    whole, _ = build.summary_tables(result, "three", wanted)
    monkeypatch.setattr(build, "SESSION_BLOCK", 1)
    blocks, _ = build.summary_tables(result, "three", wanted)
    assert whole["sessions"].num_rows == whole["paths"].num_rows == 3
    for table in wanted:
        assert blocks[table].equals(whole[table])
    times = blocks["events"].column("time").to_pylist()
    assert times == sorted(times) and len({e["path_id"] for e in
                                           blocks["events"].to_pylist()}) == 3


def test_the_analysis_is_let_go_before_the_messages_are_built(tmp_path, monkeypatch):
    """The analyzer (its sessions' state) is freed once the tables of the summary are
    made: the messages table and the IO rows' names need only what export kept."""
    analyzers = []

    def analysis(inputs, **options):
        result = analyze(inputs, **options)
        analyzers.append(weakref.ref(result.analyzer))
        return result
    pieces = build.message_pieces

    def message_pieces(*args, **kwargs):
        assert analyzers and analyzers[0]() is None
        return pieces(*args, **kwargs)
    monkeypatch.setattr(build, "message_pieces", message_pieces)
    done = export(str(real_pcap("errors")), str(tmp_path), analyze=analysis)
    assert done.rows["messages"] == len(done.messages) > 0
    assert done.rows["ios"] == real_truth("errors")["checks"]["pcap_io_req"]


def test_the_summary_tables_are_written_before_the_messages(tmp_path, monkeypatch):
    """The sessions, paths and events tables are written, and let go, before the
    messages are built: the messages table is the export's largest moment in memory.
    The files are listed in the tables' order all the same."""
    written = []
    pieces = build.message_pieces

    def message_pieces(*args, **kwargs):
        written.extend(table for table in ("sessions", "paths", "events")
                       if list((tmp_path / table).glob("*.parquet")))
        return pieces(*args, **kwargs)
    monkeypatch.setattr(build, "message_pieces", message_pieces)
    done = export(str(real_pcap("errors")), str(tmp_path))
    assert written == ["sessions", "paths", "events"]
    assert list(done.files) == list(TABLES)
    assert done.rows["sessions"] > 0 and done.rows["messages"] > 0


def test_io_rows_handed_one_at_a_time_make_the_same_row_groups(tmp_path, monkeypatch):
    """The real errors capture's IO rows handed to a writer one row at a time (as
    thousands of short sessions hand them, a few rows a batch) are gathered as they
    come: fewer than GATHER batches are ever held apart, and the file holds the same
    rows as the analyzer's batches make, in row groups of exactly 16 rows but the last."""
    monkeypatch.setattr(ios, "GATHER", 4)
    pcap = str(real_pcap("errors"))
    batched = IoWriter(tmp_path / "batched.parquet", pcap, row_group_rows=16)
    single = IoWriter(tmp_path / "single.parquet", pcap, row_group_rows=16)
    apart = []

    def sink(batch):
        batched(batch)
        for k in range(len(batch["frame"])):
            single({name: column[k:k + 1] for name, column in batch.items()})
            apart.append(len(single.arriving))
    names = Names(analyze(pcap, keep_messages=False, io_sink=sink).analyzer)
    rows = [writer.close(names) for writer in (batched, single)]
    assert rows[0] == rows[1] == real_truth("errors")["checks"]["pcap_io_req"]
    assert max(apart) == ios.GATHER - 1
    tables = [pq.read_table(writer.path) for writer in (batched, single)]
    assert tables[0].equals(tables[1])
    for writer in (batched, single):
        groups = pq.ParquetFile(writer.path).metadata
        sizes = [groups.row_group(k).num_rows for k in range(groups.num_row_groups)]
        assert set(sizes[:-1]) == {16} and 0 < sizes[-1] <= 16


def test_rows_that_wait_stay_as_they_came(tmp_path, monkeypatch):
    """A row group is joined from the batches its rows are in; the rows still waiting
    are those batches, or their tails, not copies (joining all that waited, then
    copying what stayed, set the analysis' peak at 10 M short-session packets)."""
    monkeypatch.setattr(ios, "GATHER", 1)
    pcap = str(real_pcap("errors"))
    writer = IoWriter(tmp_path / "ios.parquet", pcap, row_group_rows=16)
    came, written = [], []

    def sink(batch):
        came.append(batch)
        rows = writer.rows
        writer(batch)
        written.append(writer.rows - rows)
        for waiting in writer.pending:
            assert any(np.shares_memory(waiting["frame"], batch["frame"]) for batch in came)
    names = Names(analyze(pcap, keep_messages=False, io_sink=sink).analyzer)
    assert sum(written) > 0      # row groups were written while rows waited
    assert writer.close(names) == real_truth("errors")["checks"]["pcap_io_req"]


def test_the_rich_rows_go_in_without_arrows_compute_functions():
    """The messages table's rich rows put in by slices and buffers (message_table.py):
    the values a plain list gives, in numbers with nulls and in texts (a text the
    dictionary lacks, a null, one it holds, at the first and last rows), the column
    itself where nothing changes; the texts of a dictionary cut to the ones its rows
    name (beyond 256) the same texts."""
    from rtrs_scapy.tables.arrays import Texts
    from rtrs_scapy.tables.message_table import _with_rich

    numbers = pa.array([5, None, 7, 8, None, 10], pa.int64())
    at = [0, 2, 5]
    assert _with_rich(numbers, at, [5, 7, 10], pa.int64()) is numbers
    changed = _with_rich(numbers, at, [None, 70, -1], pa.int64())
    assert changed.to_pylist() == [None, None, 70, 8, None, -1]
    assert _with_rich(numbers, [1, 3], [None, 8], pa.int64()) is numbers
    assert _with_rich(numbers, [1], [0], pa.int64()).to_pylist()[1] == 0
    sliced = numbers.slice(2)          # read from an offset into its buffers
    assert _with_rich(sliced, [0, 2], [7, None], pa.int64()) is sliced
    assert _with_rich(sliced, [0], [8], pa.int64()).to_pylist() == [8, 8, None, 10]
    wrapped = pa.array([-1, 3], pa.int32())     # a u32 wire value beyond the signed type
    assert _with_rich(wrapped, [0], [0xFFFFFFFF], pa.int32()) is wrapped
    halves = pa.array([0.5, None, 2.25], pa.float64())
    assert _with_rich(halves, [0, 2], [0.5, 2.25], pa.float64()) is halves
    assert _with_rich(halves, [2], [2.5], pa.float64()).to_pylist() == [0.5, None, 2.5]
    times = pa.array([10, 20], pa.timestamp("ns", "UTC"))
    assert _with_rich(times, [1], [20], pa.timestamp("ns", "UTC")) is times
    flags = pa.array([True, None, False])       # no buffer of numbers: compared by Arrow
    assert _with_rich(flags, [0, 2], [True, False], pa.bool_()) is flags
    assert _with_rich(flags, [1], [True], pa.bool_()).to_pylist() == [True, True, False]
    texts = Texts(["a", None, "b"]).take(np.array([0, 2, 1, 0, 2]))
    assert _with_rich(texts, [0, 4], ["a", "b"], pa.string()) is texts
    assert _with_rich(texts, [2], [None], pa.string()) is texts
    changed = _with_rich(texts, [0, 1, 4], ["new", None, "a"], pa.string())
    assert pa.types.is_dictionary(changed.type)
    assert changed.to_pylist() == ["new", None, None, "a", "a"]
    many = [str(k) for k in range(300)]
    cut = Texts(many).take(np.array([299, 5, 5, 120]))
    assert cut.to_pylist() == ["299", "5", "5", "120"] and len(cut.dictionary) == 3


def test_events_are_in_time_order_without_arrows_sort():
    """Events sorted by (no time last, time, frame with none as 0), equal ones as they
    came (build._in_order: runs of rows as slices), as Python's stable sort of the rows."""
    rng = np.random.default_rng(5)
    rows = [{"time": None if rng.random() < 0.2 else int(rng.integers(0, 4)),
             "frame": None if rng.random() < 0.2 else int(rng.integers(0, 3)), "n": k}
            for k in range(200)]
    table = pa.Table.from_pylist(rows)
    keys = [build._time_order_key(row) for row in rows]
    ordered = build._in_order(table, keys)
    assert ordered.to_pylist() == sorted(rows, key=build._time_order_key)
    assert build._in_order(ordered, sorted(keys)) is ordered


def test_the_messages_table_is_the_same_with_the_whole_captures_pairs():
    """The real failover capture's messages table, its responses' requests found a row
    group at a time (records.RequestsSoFar), is the one the whole capture's pairs give
    (``Records.partners``, taken where a response was paired no later than its
    request), in row groups of 1,000 records."""
    result = analyze(real_pcap("failover"))
    records = result.messages.records
    assert not records.answered_first
    so_far = [t.to_pylist() for t in build.messages_tables(result, "c", rows_per_table=1000)]
    records.answered_first = True
    whole = [t.to_pylist() for t in build.messages_tables(result, "c", rows_per_table=1000)]
    assert so_far == whole and len(so_far) > 20
