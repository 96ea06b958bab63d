"""``rtrs-dissect iostat`` and where the time of an IO goes (docs/iostat.md,
docs/latency.md).

* iostat's counts and bytes summed over the intervals are the summary's, per
  device (the RNBD view, and what the client's block layer counted in
  /sys/block/rnbdN/stat) and per path (the kernel's stats/rdma counting), on every
  real capture; its text, JSON lines and CSV say the same; the text has a header per
  interval like ``iostat -x``.
* Every request on the wire is answered, and its IO row's parts sum to its
  ``wire_us``, which is ``latency_us + request_us`` unless failed over; on the load
  capture the summary has the server's time per device and operation.
* The referee of the split: the frame times and opcodes tshark reads, with simple
  code here that finds each IO's packets (request, a read's data by its rkey,
  response) on its own.
"""

import csv
import io
import json
import math
import tracemalloc
from decimal import Decimal

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap, real_truth
from rtrs_scapy.analysis import analyze, iorows
from rtrs_scapy.analysis.iostat import kept_rows
from rtrs_scapy.cli import main
from rtrs_scapy.report import iostat as view
from rtrs_scapy.tables.ios import arrow_rows
from rtrs_scapy.tables.names import Names
from tshark_util import _run, TSHARK_OPTIONS

PARTS = ("request_us", "server_us", "data_us", "response_us")


@pytest.fixture(scope="module")
def analyses():
    """Each real capture analysed once, with its IO rows."""
    done = {}
    for name, path, _ in REAL_ALL:
        batches = []
        done[name] = (analyze(str(path), io_sink=batches.append), batches)
    return done


def _sum(records, key, *group):
    totals = {}
    for record in records:
        at = tuple(record[g] for g in group)
        totals[at] = totals.get(at, 0) + record[key]
    return totals


def _session_name(session):
    return session["sessname"] or (session["paths_uuid"] or "")[:8]


#: /sys/block/<dev>/stat (the kernel's Documentation/block/stat.rst): the field of each
#: count, sectors of 512 bytes
STAT_FIELDS = {"reads": 0, "read_bytes": 2, "writes": 4, "write_bytes": 6, "discards": 11,
               "discard_bytes": 13, "flushes": 15}


def block_layer_counts(truth):
    """{(session, device path): counts} of each mapped RNBD device as the client's block
    layer counted its requests (/sys/block/rnbdN/stat, read out before the unmap).  An
    fsync is an empty PREFLUSH write: the block layer counts it as a write and the flush
    request it becomes as a flush (block/blk-flush.c), RNBD carries the flush alone
    (RNBD_OP_FLUSH): the writes on the wire are the block layer's writes less its
    flushes."""
    out = {}
    for label, entries in truth["sysfs"]["client"].items():
        if not label.startswith("client.dev."):
            continue
        block = "/sys/block/%s/" % label[len("client.dev."):]
        stat = [int(v) for v in entries[block + "stat"].split()]
        counts = {key: stat[at] * (512 if key.endswith("bytes") else 1)
                  for key, at in STAT_FIELDS.items()}
        counts["writes"] -= counts["flushes"]
        out[entries[block + "rnbd/session"], entries[block + "rnbd/mapping_path"]] = counts
    return out


@pytest.mark.parametrize("name", [entry[0] for entry in REAL_ALL])
def test_devices_sum_to_the_summary(name, analyses):
    """Per device the RNBD view's counts, grouped like the block layer's statistics,
    and what the client's block layer counted itself."""
    result, batches = analyses[name]
    records = view.records(result, batches, by="device", interval_s=0.5)
    expected = {}
    for session in result.summary["sessions"]:
        for device_id, device in session["rnbd"]["devices"].items():
            ops = device["ops"]
            count = {op: ops.get(op, {}).get("count", 0) for op in
                     ("read", "write", "write_zeroes", "discard", "secure_erase", "flush")}
            nbytes = {op: ops.get(op, {}).get("bytes", 0) for op in count}
            expected[_session_name(session), int(device_id)] = {
                "reads": count["read"], "writes": count["write"] + count["write_zeroes"],
                "discards": count["discard"] + count["secure_erase"],
                "flushes": count["flush"], "read_bytes": nbytes["read"],
                "write_bytes": nbytes["write"] + nbytes["write_zeroes"],
                "discard_bytes": nbytes["discard"] + nbytes["secure_erase"],
                "errors": sum(ops[op]["errors"] for op in ops)}
    got, named = {}, {}
    for record in records:
        at = got.setdefault((record["session"], record["device_id"]), {})
        for key in view.COUNT_KEYS:
            at[key] = at.get(key, 0) + record[key]
        named[record["session"], record["device"]] = at
    assert got == {k: v for k, v in expected.items() if any(v.values())}
    assert {at: {k: v for k, v in counts.items() if k != "errors"}
            for at, counts in named.items()} == block_layer_counts(real_truth(name))


@pytest.mark.parametrize("name", [entry[0] for entry in REAL_ALL])
def test_paths_sum_to_the_summary_and_the_kernel(name, analyses):
    """Per path the kernel's stats/rdma counting (the summary's RTRS requests)."""
    result, batches = analyses[name]
    records = view.records(result, batches, by="path", interval_s=1.0)
    got = {}
    for record in records:
        at = got.setdefault((record["client"], record["server"], record["sess_uuid"]),
                            [0, 0, 0, 0, 0, 0])
        for k, key in enumerate(("reads", "writes", "read_bytes", "write_bytes", "errors",
                                 "stalls")):
            at[k] += record[key]
    expected = {}
    for session in result.summary["sessions"]:
        for path in session["paths"]:
            io_ = path["io"]
            at = expected.setdefault((str(path["client"]), str(path["server"]),
                                      path["sess_uuid"]), [0, 0, 0, 0, 0, 0])
            for k, value in enumerate((io_["read"]["count"], io_["write"]["count"],
                                       io_["read"]["bytes"], io_["write"]["bytes"],
                                       io_["read"]["errors"] + io_["write"]["errors"],
                                       len(path["stalls"]))):
                at[k] += value
    assert got == {k: v for k, v in expected.items() if any(v[:4]) or k in got}
    sessions = view.records(result, batches, by="session", interval_s=2.0)
    assert sum(r["reads"] + r["writes"] for r in sessions) == \
        sum(v[0] + v[1] for v in expected.values())


def test_text_json_csv_agree():
    capture = str(real_pcap("multipath"))
    runner = CliRunner()
    outputs = {fmt: runner.invoke(main, ["iostat", capture, "--by", "path", "-i", "0.5",
                                         "--format", fmt]) for fmt in ("text", "json", "csv")}
    for fmt, done in outputs.items():
        assert done.exit_code == 0, (fmt, done.output)
    records = [json.loads(line) for line in outputs["json"].output.splitlines()]
    rows = list(csv.DictReader(io.StringIO(outputs["csv"].output)))
    # a record per interval of 0.5 s and path (the capture's 18.337 s, its two paths)
    truth = real_truth("multipath")
    assert len(rows) == len(records) == \
        math.ceil(truth["pcap_stats"]["duration_s"] / 0.5) * truth["config"]["paths"]
    for record, row in zip(records, rows):
        assert list(row) == list(record)
        for key, value in record.items():
            assert row[key] == ("" if value is None else str(value)), key
    # the text: one line per record under its interval's header, the same figures
    lines = [line for line in outputs["text"].output.splitlines() if "→" in line]
    assert len(lines) == len(records)
    for record, line in zip(records, lines):
        cells = line.split("→", 1)[1].split()[1:]
        shown = dict(zip([h for _, h, _, _ in view.COLUMNS if h not in
                          ("d/s", "f/s")] + ["retrans", "stalls"], cells))
        assert shown["r/s"] == "%.2f" % record["r_per_s"]
        assert shown["wkB/s"] == "%.1f" % record["wkB_per_s"]
        assert shown["errors"] == str(record["errors"])
        assert shown["stalls"] == str(record["stalls"])
        assert shown["r_await"] == ("-" if record["r_await_ms"] is None
                                    else "%.2f" % record["r_await_ms"])
        assert shown["aqu-sz"] == "%.2f" % record["aqu_sz"]


def test_the_output_is_written_as_it_is_made_not_held_whole():
    """Thousands of intervals (0.8 MB of text): each format's records are made and
    written a few at a time, never all held (tracemalloc's peak while writing, a
    small part of what is written); the parts join to the whole outputs."""
    kept = kept_rows()
    result = analyze(str(real_pcap("multipath")), keep_messages=False, io_sink=kept)
    table = view.table(result, kept, by="path", interval_s=0.01)
    whole = list(table)
    for parts, joined in ((lambda t: view.text_parts(t, "path"), view.text(whole, "path")),
                          (view.json_parts, view.json_lines(whole)),
                          (view.csv_parts, view.csv_text(whole))):
        tracemalloc.start()
        written = 0
        for part in parts(table):
            written += len(part)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert "".join(parts(table)) == joined
        assert written > 500_000 and peak < written / 3


def test_text_has_a_header_per_interval_like_iostat():
    done = CliRunner().invoke(main, ["iostat", str(real_pcap("basic_inval")), "-i", "2"])
    assert done.exit_code == 0, done.output
    blocks = done.output.strip("\n").split("\n\n")
    # 14.053 s of capture in intervals of 2 s
    assert len(blocks) == math.ceil(14.053 / 2)
    for k, block in enumerate(blocks):
        stamp, header, *lines = block.splitlines()
        assert stamp.endswith("interval %d  (%s s)" % (k, "2.000" if k < len(blocks) - 1 else "0.053"))
        assert header.split() == ["device", "r/s", "w/s", "rkB/s", "wkB/s", "d/s", "f/s",
                                  "r_await", "w_await", "p99", "srv_ms", "aqu-sz", "%util",
                                  "errors"]
        assert [line.split()[:3] for line in lines] == [["lab1", "0", "/dev/ram0"]]
        # aligned: every figure ends under the end of its header
        ends = [i + 1 for i, c in enumerate(header) if c != " " and
                (i + 1 == len(header) or header[i + 1] == " ")]
        line_ends = [i + 1 for i, c in enumerate(lines[0]) if c != " " and
                     (i + 1 == len(lines[0]) or lines[0][i + 1] == " ")]
        assert line_ends[-13:] == ends[-13:]


def test_unknown_device_lists_the_known_ones():
    done = CliRunner().invoke(main, ["iostat", str(real_pcap("errors")), "--device", "nope"])
    assert done.exit_code == 2
    assert "no device 'nope'" in done.output and "/dev/loop0" in done.output
    done = CliRunner().invoke(main, ["iostat", str(real_pcap("errors")), "--device",
                                     "/dev/ram1", "--format", "json"])
    assert done.exit_code == 0
    assert {json.loads(line)["device"] for line in done.output.splitlines()} == {"/dev/ram1"}


def test_a_device_by_the_client_s_name_from_its_kernel_log():
    """The client's console names /dev/loop0 rnbd0 (its ``I/O error, dev rnbd0`` lines):
    ``--device rnbd0`` with that log is ``--device /dev/loop0``; without it, rnbd0 is
    unknown."""
    capture = str(real_pcap("errors"))
    log = str(real_pcap("errors").with_name("errors.client.log.gz"))
    runner = CliRunner()
    by_name = runner.invoke(main, ["iostat", capture, "--kernel-log", log, "--device", "rnbd0",
                                   "--format", "json"])
    by_path = runner.invoke(main, ["iostat", capture, "--device", "/dev/loop0",
                                   "--format", "json"])
    assert by_name.exit_code == by_path.exit_code == 0, by_name.output
    assert by_name.stdout == by_path.stdout
    assert {json.loads(line)["device"] for line in by_path.stdout.splitlines()} == \
        {"/dev/loop0"}
    assert runner.invoke(main, ["iostat", capture, "--device", "rnbd0"]).exit_code == 2


@pytest.mark.parametrize("name", [entry[0] for entry in REAL_ALL])
def test_parts_sum_to_wire(name, analyses):
    result, batches = analyses[name]
    table = arrow_rows(iorows.concat(batches), name, Names(result.analyzer))[0].to_pydict()
    checked = 0
    for k in range(len(table["frame"])):
        parts = [table[p][k] for p in PARTS]
        wire = table["wire_us"][k]
        if table["outcome"][k] != "answered":
            assert wire is None and all(p is None for p in parts)
            continue
        if None in parts or wire is None:
            continue
        assert abs(sum(parts) - wire) < 1e-6
        assert min(parts) >= 0
        if table["failover_from"][k] is None:
            assert abs(wire - (table["latency_us"][k] + table["request_us"][k])) < 1e-6
        else:
            assert wire <= table["latency_us"][k] + table["request_us"][k]
        checked += 1
    # every request on the wire (the recording's count of IO_REQ immediates) answered,
    # and each split into its parts
    assert checked == table["outcome"].count("answered") == \
        real_truth(name)["checks"]["pcap_io_req"]


def test_server_time_per_device_and_op_on_the_load_capture(analyses):
    result, _ = analyses["load"]
    ops = result.summary["sessions"][0]["rnbd"]["devices"]["0"]["ops"]
    for op in ("read", "write"):
        server = ops[op]["split_us"]["server"]
        assert server["count"] == ops[op]["count"]
        assert 0 < server["p50"] <= server["p99"] <= ops[op]["latency_us"]["p99"]
    from rtrs_scapy.report.text import render
    text = render(result.summary)
    assert "where the time goes" in text
    line = next(line for line in text.splitlines() if "0 /dev/ram0" in line and "/" in
                line.split("/dev/ram0")[1])
    cells = line.split()
    assert cells[2] == "read"
    server = ops["read"]["split_us"]["server"]
    assert cells[4] == "%.1f/%.1f" % (server["p50"], server["p99"])


def _ns(text):
    return int(Decimal(text) * 1000000000)


def test_split_against_tshark():
    """Each IO's packets found in tshark's fields, by QP, opcode and rkey."""
    capture = real_pcap("basic_inval")
    out = _run(["tshark", *TSHARK_OPTIONS, "-r", str(capture), "-T", "fields",
                "-e", "frame.number", "-e", "frame.time_epoch", "-e", "infiniband.bth.opcode",
                "-e", "infiniband.bth.destqp", "-e", "infiniband.reth.r_key"])
    packets = {}
    for line in out.splitlines():
        frame, stamp, opcode, qp, rkey = (line.split("\t") + [""] * 5)[:5]
        if opcode:
            packets[int(frame)] = (_ns(stamp), int(opcode), int(qp, 16),
                                   int(rkey, 16) if rkey else None)
    batches = []
    result = analyze(str(capture), io_sink=batches.append)
    table = arrow_rows(iorows.concat(batches), "x", Names(result.analyzer))[0].to_pydict()
    frames = sorted(packets)
    checked = {"read": 0, "write": 0}
    for k in range(len(table["frame"])):
        request, response = table["frame"][k], table["response_frame"][k]
        if response is None:
            continue
        t_req, opcode, server_qp, _ = packets[request]
        # the request's first packet: back on its QP to RDMA WRITE FIRST (6), or itself
        first = request
        while opcode not in (6, 11):
            first = max(f for f in frames if f < first and packets[f][2] == server_qp)
            opcode = packets[first][1]
        t_rsp, rsp_opcode, client_qp, _ = packets[response]
        assert rsp_opcode in (5, 11)             # SEND ONLY w/ imm, RDMA WRITE ONLY w/ imm
        expected = {"request_us": t_req - packets[first][0]}
        data = [f for f in frames if request < f < response and packets[f][2] == client_qp
                and packets[f][1] in (6, 10) and packets[f][3] is not None]
        if table["op"][k] == "read":
            # the data: the RDMA WRITE (FIRST or ONLY) with a key, to its LAST or ONLY;
            # an IO beside another read on its QP is left out (which data is whose
            # takes the key in the request, which tshark does not decode)
            if len(data) != 1:
                continue
            start = data[0]
            end = start
            while packets[end][1] not in (8, 10):
                end = min(f for f in frames if f > end and packets[f][2] == client_qp)
            expected.update(server_us=packets[start][0] - t_req,
                            data_us=packets[end][0] - packets[start][0],
                            response_us=t_rsp - packets[end][0])
        else:
            expected.update(server_us=t_rsp - t_req, data_us=0, response_us=0)
        for part, ns in expected.items():
            assert table[part][k] == pytest.approx(ns / 1e3, abs=1e-6), (request, part)
        checked[table["op"][k]] += 1
    # every request the kernel counted (stats/rdma before the unmap, and the unmap's
    # CLOSE), but the first part of each read the block layer split in two (its parts in
    # flight at once: whose data is whose, tshark cannot tell)
    truth = real_truth("basic_inval")
    rdma = next(iter(truth["rtrs_stats"]["client"]["pre_unmap"].values()))["rdma"]
    split_reads = sum(1 for io in truth["ios"]
                      if io["op"] == "read" and len(io["rtrs_requests_expected"]) == 2)
    assert checked == {"read": rdma["reads"] - split_reads,
                       "write": rdma["writes"] + len(truth["unmaps"])}


def test_report_split_bands_stack_to_the_wire_time(analyses):
    """The report's stacked bars: per op and band of wire time, the parts' means add up
    to the band's mean wire_us of the ios table."""
    from rtrs_scapy.report import figures
    from rtrs_scapy.report.view import CaptureView
    result, batches = analyses["load"]
    device = CaptureView(result, batches).sessions[0].devices[0]
    bars = figures.Split(device).bars
    table = arrow_rows(iorows.concat(batches), "x", Names(result.analyzer))[0].to_pydict()
    for op in ("read", "write"):
        wire = sorted(table["wire_us"][k] for k in range(len(table["frame"]))
                      if table["rnbd_op"][k] == op and table["failed_over"][k] is False
                      and None not in [table[p][k] for p in PARTS])
        mine = [bar for bar in bars if bar[0] == op]
        assert [count for _, _, count, _ in mine] == [
            len(wire) * high // 100 - len(wire) * low // 100
            for low, high, _ in figures.Split.BANDS]
        start = 0
        for _, band, count, means in mine:
            assert sum(means.values()) == pytest.approx(
                float(np.mean(wire[start:start + count])), rel=1e-9), band
            start += count


def test_a_capture_spanning_years_is_refused_in_one_line():
    """Lines are bounded (analysis/iostat.py MAX_LINES): no table of a line per µs."""
    done = CliRunner().invoke(main, ["iostat", str(real_pcap("deep")), "-i", "0.000001"])
    assert done.exit_code == 1
    assert done.output.count("\n") == 1
    assert "use --interval 0.0001 or longer" in done.output


def _answered_spans(batches, block_io=False):
    """(first send, response) of the answered requests (of the block IO only: RNBD IO,
    a failed-over one as its copy)."""
    rows = iorows.concat(batches)
    return [(int(r - lat), int(r)) for r, lat, outcome, op, moved in zip(
        rows["response_ns"].tolist(), rows["latency_ns"].tolist(), rows["outcome"].tolist(),
        rows["rnbd_op"].tolist(), rows["failed_over"].tolist())
        if outcome == iorows.ANSWERED and lat >= 0 and (not block_io or op >= 0 and not moved)]


def _sweep(spans):
    """(time, in flight after it) of every start and end, simple code: ends first at a tie."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda ev: (ev[0], ev[1]))
    level, out = 0, []
    for time, step in events:
        level += step
        out.append((time, level))
    return out


def test_queue_figures_against_a_simple_sweep(analyses):
    """The deep capture (one path, one device): the deepest queue, and the time at a depth
    below it (its 128 permits were never all taken, so a depth of 20 stands in)."""
    from rtrs_scapy.analysis.inflight import InFlight
    result, batches = analyses["deep"]
    sweep = _sweep(_answered_spans(batches))
    peak = max(level for _, level in sweep)
    at_20 = sum(b[0] - a[0] for a, b in zip(sweep, sweep[1:]) if a[1] >= 20) / 1e9
    path = result.summary["sessions"][0]["paths"][0]
    assert path["max_in_flight"] == peak == 31
    assert path["queue_full_s"] == 0.0
    figures = InFlight()
    for batch in batches:
        figures.add(batch)
    got = figures.figures(lambda pid: "session", lambda pid: 20)
    assert got[("path", 0)] == {"max_in_flight": 31, "queue_full_s": round(at_20, 6)}
    assert at_20 > 0.1


def test_queue_size_and_busy_time_per_interval_against_a_simple_sweep(analyses):
    result, batches = analyses["deep"]
    spans = _answered_spans(batches, block_io=True)
    records = view.records(result, batches, by="device", interval_s=1.0)
    first = int(round(result.summary["capture"]["first_ts"] * 1e9))
    sweep = _sweep(spans)
    for record in records:
        low = first + record["interval"] * 1_000_000_000
        high = low + int(round(record["seconds"] * 1e9))
        area = sum(max(0, min(e, high) - max(s, low)) for s, e in spans)
        busy = sum(max(0, min(b[0], high) - max(a[0], low))
                   for a, b in zip(sweep, sweep[1:]) if a[1] > 0)
        width = high - low
        assert record["aqu_sz"] == pytest.approx(area / width, abs=1e-3)
        assert record["util_pct"] == pytest.approx(100.0 * busy / width, abs=1e-2)
    assert max(r["util_pct"] for r in records) == 100.0


def test_a_capture_without_io_says_so():
    """A rejected connection and no IO: nothing on stdout, one line on stderr, exit 0."""
    capture = str(PROJECT_PCAPS / "reject_enxio.pcap")
    done = CliRunner().invoke(main, ["iostat", capture])
    assert done.exit_code == 0
    assert done.stdout == ""
    assert done.stderr == "%s: no RNBD IO in the capture\n" % capture


@pytest.mark.parametrize("by", ["device", "path", "session"])
def test_iostat_makes_no_sessions_summary_unless_it_names_devices(by, monkeypatch):
    """iostat reads the capture's start and end of the summary, not its sessions (about
    22 KB each): without --kernel-log, --device-map or --device, the whole summary is
    never made, and the lines are those of an analysis whose whole summary was made."""
    from functools import partial
    from rtrs_scapy.analysis import Analysis
    capture = str(real_pcap("errors"))
    kept = kept_rows()
    result = analyze(capture, keep_messages=False, io_sink=kept, keep_latencies=False)
    assert result.summary["sessions"]
    made = "".join(view.json_parts(view.table(result, kept, by=by, interval_s=0.5)))
    assert made.count("\n") > 10

    def refused(self):
        raise AssertionError("the whole summary was made")
    monkeypatch.setattr(Analysis, "summary", property(refused))
    args = ["iostat", "-q", "-i", "0.5", "--by", by, "--format", "json", capture]
    alone = CliRunner().invoke(main, args)
    assert alone.exit_code == 0, alone.output
    assert alone.output == made
    if by == "device":     # --device names a device across the sessions' summaries
        assert "the whole summary was made" in \
            repr(CliRunner().invoke(main, args + ["--device", "0"]).exception)


def test_text_is_made_a_line_at_a_time():
    """An interval of thousands of groups is MBs of text: no piece of the text is more
    than one line (an interval's stamp and header are one piece), so the command
    writes a bounded batch of them at a time."""
    kept = kept_rows()
    result = analyze(str(real_pcap("multipath")), keep_messages=False, io_sink=kept)
    table = view.table(result, kept, by="path", interval_s=0.01)
    parts = list(view.text_parts(table, "path"))
    assert len(parts) > 1000
    assert all(part == "\n" or part.count("\n") == 1 for part in parts
               if "interval" not in part)
    assert all(part.count("\n") == 2 for part in parts if "interval" in part)


def test_counts_and_bytes_are_kept_narrow_and_exact():
    """The table's counts are kept in the smallest type that holds every row, its bytes
    in the one that holds all their bytes: two writes of 3 GiB in one interval are
    6 GiB, not a wrapped int32; a handful of IOs are counted in bytes (int8)."""
    from rtrs_scapy.analysis import iostat
    gib3 = 3 << 30
    rows = iorows.Wide({name: np.array(values, dtype=np.int64) for name, values in {
        "time_ns": [0, 10, 20], "response_ns": [5, 15, 25], "latency_ns": [5, 5, 5],
        "outcome": [iorows.ANSWERED] * 3, "errno": [0, 0, 5], "server_ns": [-1, -1, -1],
        "bytes": [gib3, gib3, 512]}.items()})
    kind = np.array([1, 1, 0], dtype=np.int8)           # two writes, a read
    group = np.zeros(3, dtype=np.int64)
    edges = np.array([0, 100], dtype=np.int64)
    columns = iostat.table(rows, group, kind, rows["bytes"], 1, edges)
    assert columns["writes"].dtype == np.int8 and columns["errors"].dtype == np.int8
    assert columns["write_bytes"].dtype == np.int64
    assert columns["write_bytes"].tolist() == [2 * gib3]
    assert columns["read_bytes"].tolist() == [512]
    assert (columns["reads"].tolist(), columns["writes"].tolist(),
            columns["errors"].tolist()) == ([1], [2], [1])


def test_a_full_disk_under_the_kept_io_rows_is_a_one_line_error(tmp_path, monkeypatch):
    """The IO rows iostat keeps go to disk beyond the newest blocks: no room there is
    one line naming the folder and the cause, exit 1, and the folder is gone."""
    import errno
    import gc
    import os
    import tempfile
    from cli_run import run
    from rtrs_scapy.analysis import spill

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(iorows, "JOIN", 1)      # a block a batch: the third goes to disk
    monkeypatch.setattr(spill, "open", full, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run("iostat", real_pcap("load"))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: cannot keep the IO rows in " + str(tmp_path))
    assert last.endswith("No space left on device")
    gc.collect()
    assert not os.listdir(tmp_path)
