"""Named scenarios for the crafter: each is a function ``(crafter, **params)``
driving a SessionCrafter, registered with its defaults and a one-line story.

``craft_scenario(name, seed=0, **params) -> (packets, truth)``.
Crafter options (encap, ip_version, vlan, pmtu, always_invalidate, queue_depth,
cpus) are parameters of every scenario; the rest are the scenario's own.
"""

import errno as _errno

from ..spec.constants import RNBD_F_FUA, RNBD_F_SYNC, RTRS_MAGIC, RTRS_PROTO_VER_MAJOR
from ..spec.imm import mem_bits
from .params import CM_REJ_CONSUMER, CM_REJ_INVALID_SID, C, S
from .encap import Encap
from .session import SessionCrafter

SCENARIOS = {}

CRAFTER_PARAMS = {"encap": "rocev2", "ip_version": 4, "vlan": None, "pmtu": 1024,
                  "always_invalidate": True, "queue_depth": 512, "cpus": 2,
                  "sessname": "lab1"}


def scenario(name, doc, **defaults):
    def register(fn):
        SCENARIOS[name] = (fn, doc, defaults)
        return fn
    return register


def scenario_names():
    return sorted(SCENARIOS)


def make_crafter(seed=0, **params):
    encap = Encap(kind=params["encap"], ip_version=params["ip_version"], vlan=params["vlan"])
    return SessionCrafter(seed=seed, encap=encap, pmtu=params["pmtu"],
                          always_invalidate=params["always_invalidate"],
                          queue_depth=params["queue_depth"], cpus=params["cpus"],
                          sessname=params["sessname"])


def craft_scenario(name, seed=0, **params):
    """Craft the named scenario; returns (list of Scapy packets with .time, truth dict)."""
    crafter, truth_since, merged = _run(name, seed, params)
    packets = crafter.packets(since=truth_since)
    truth = crafter.truth(since=truth_since, scenario=name, params=merged)
    truth["frames"] = len(packets)
    return packets, truth


def craft_frames(name, seed=0, **params):
    """Like craft_scenario but (time, bytes) frames: cheaper for writing files."""
    crafter, truth_since, merged = _run(name, seed, params)
    frames = crafter.frames(since=truth_since)
    truth = crafter.truth(since=truth_since, scenario=name, params=merged)
    truth["frames"] = len(frames)
    return frames, truth, crafter.encap.linktype


def _run(name, seed, params):
    if name not in SCENARIOS:
        raise KeyError("unknown scenario %r (known: %s)" % (name, ", ".join(scenario_names())))
    fn, _doc, defaults = SCENARIOS[name]
    merged = dict(CRAFTER_PARAMS)
    merged.update(defaults)
    unknown = set(params) - set(merged)
    if unknown:
        raise TypeError("scenario %s has no parameter(s) %s" % (name, ", ".join(sorted(unknown))))
    merged.update(params)
    crafter = make_crafter(seed, **{k: merged[k] for k in CRAFTER_PARAMS})
    own = {k: v for k, v in merged.items() if k not in CRAFTER_PARAMS}
    since = fn(crafter, **own)
    return crafter, since, merged


def _workload(s, writes4k=4, reads4k=4, big=0, device_id=0, parallel=0):
    for i in range(writes4k):
        s.io("write", i * 4096, 4096, device_id=device_id)
    for i in range(reads4k):
        s.io("read", i * 4096, 4096, device_id=device_id)
    if parallel:
        s.io_batch([dict(op="write" if i % 2 else "read", offset=(64 + i) * 4096, size=4096,
                         device_id=device_id) for i in range(parallel)], shuffle=True)
    for i in range(big):
        s.io("write", (1 + i) << 20, 131072, device_id=device_id)
    for i in range(big):
        s.io("read", (1 + i) << 20, 131072, device_id=device_id)


def _open_session(s, dev="/dev/ram0"):
    path = s.add_path()
    s.connect(path)
    return path, s.rnbd_map(dev)


def _close_session(s, dev, paths):
    s.rnbd_close(dev)
    for path in paths:
        if path.state == "connected":
            s.disconnect(path)


@scenario("basic", "map, 4 KiB writes/reads, 128 KiB IO (split 124+4 KiB), a batch of "
          "parallel IOs answered out of order, idle with heartbeats, unmap, disconnect — the "
          "real captures' workload in small",
          writes4k=4, reads4k=4, big=1, idle=6.0, parallel=4)
def _basic(s, writes4k, reads4k, big, idle, parallel):
    path, dev = _open_session(s)
    _workload(s, writes4k, reads4k, big, dev, parallel)
    s.idle(idle)
    _close_session(s, dev, [path])


@scenario("load", "concurrent random IO: batches of `concurrency` reads and writes of 1 KiB "
          "to 16 KiB in flight together on the IO connections, answered in a random order, "
          "as a production session under load carries them (sizes that fit the chunk the "
          "queue depth leaves)", concurrency=16, ios=120, max_size=16384)
def _load(s, concurrency, ios, max_size):
    path, dev = _open_session(s)
    rng = s.rng
    room = 1 << mem_bits(s.qd)   # the immediate's offset: data + RNBD header + trailer
    sizes = [n for n in (1024, 2048, 4096, 8192, 16384) if n + 64 < room and n <= max_size]
    done = 0
    while done < ios:
        count = min(concurrency, ios - done, s.qd)
        s.io_batch([dict(op=rng.choice(("read", "write")), device_id=dev,
                         offset=rng.randrange(0, 1 << 30, 4096), size=rng.choice(sizes))
                    for _ in range(count)], shuffle=True)
        done += count
    _close_session(s, dev, [path])


@scenario("sequential", "large sequential IO, as a streaming copy puts it: batches of `depth` "
          "requests of `size` bytes (the kernel's max_io_size by default) at consecutive "
          "offsets, `ios` writes, then reads of the same range", depth=8, ios=16, size=126976)
def _sequential(s, depth, ios, size):
    path, dev = _open_session(s)
    for op in ("write", "read"):
        for first in range(0, ios, depth):
            s.io_batch([dict(op=op, device_id=dev, offset=k * size, size=size)
                        for k in range(first, min(first + depth, ios))])
    _close_session(s, dev, [path])


@scenario("real_workload", "the workload of the pcaps/real/basic_* truth.json: 20+20 x 4 KiB, "
          "2+2 x 128 KiB, 2+2 x 124 KiB, 12 s idle, unmap",
          idle=12.0)
def _real_workload(s, idle):
    path, dev = _open_session(s)
    for tag, op, size, count in (("w4k", "write", 4096, 20), ("r4k", "read", 4096, 20)):
        for i in range(count):
            s.io(op, i * size, size, device_id=dev, label=tag)
    for size, base in ((131072, 1 << 20), (126976, 4 << 20)):
        for op in ("write", "read"):
            for i in range(2):
                s.io(op, base + (i << 20), size, device_id=dev)
    s.idle(idle)
    _close_session(s, dev, [path])


def _two_paths(s):
    """Two connected paths of one session and a mapped device."""
    p0, p1 = s.add_path(), s.add_path()
    s.connect(p0)
    s.connect(p1)
    return p0, p1, s.rnbd_map()


def _alternating(s, ios, dev):
    """``ios`` 4 KiB IOs, writes and reads in turn, from offset 0 on."""
    for i in range(ios):
        s.io("write" if i % 2 == 0 else "read", i * 4096, 4096, device_id=dev)


def _io_until(s, dev, done, every, first="write", most=None):
    """4 KiB IOs, ``first`` and the other operation in turn from offset 0 on, one
    every ``every`` seconds (at most ``most`` of them) until ``done()``."""
    ops = (first, "read" if first == "write" else "write")
    n = 0
    while not done():
        if most is None or n < most:
            s.io(ops[n % 2], n * 4096, 4096, device_id=dev)
            n += 1
        s.wait(every)


def _back(path):
    """The path reconnected after its failure."""
    return path.state == "connected" and path.connects >= 2


@scenario("multipath_failover", "two paths, IO round-robin; path 1's server side goes silent "
          "with a write in flight: no ACKs, one unanswered heartbeat, go-back-N "
          "retransmissions; after 7 retries the client closes path 1 (DREQs), re-issues the "
          "write on path 0 with the same buf_id, IO continues on path 0, path 1 reconnects "
          "~31 s later with recon_cnt 2",
          ios_before=4, ios_during=6, ios_after=4)
def _multipath(s, ios_before, ios_during, ios_after):
    p0, p1, dev = _two_paths(s)
    _alternating(s, ios_before, dev)
    s.fail_path(p1)
    s.io("write", 1 << 20, 4096, device_id=dev, path=p1)  # in flight when the path dies
    # IO keeps going on path 0 while path 1 is dead, until it is back
    _io_until(s, dev, lambda: _back(p1), 3.0, most=ios_during)
    _alternating(s, ios_after, dev)
    s.idle(5.5)
    _close_session(s, dev, [p0, p1])


def _reconnects_failed(s, path):
    return sum(1 for e in s.events if e["kind"] == "reconnect_failed" and e["path"] == path.index)


@scenario("failover_inflight", "two paths; path 1's server side goes silent with several "
          "requests in flight on it (capture on the client's side): go-back-N "
          "retransmissions until the QP gives up, the client closes path 1 (DREQs, "
          "unanswered) and re-sends every request in flight on path 0 with its buf_id "
          "(path 0's failover_cnt), path 1 reconnects ~31 s later",
          in_flight=4, ios=4)
def _failover_inflight(s, in_flight, ios):
    p0, p1, dev = _two_paths(s)
    _alternating(s, ios, dev)
    s.fail_path(p1)
    s.io_batch([dict(op="write" if i % 2 == 0 else "read", offset=(256 + i) * 4096,
                     size=4096, device_id=dev) for i in range(in_flight)], path=p1)
    _io_until(s, dev, lambda: _back(p1), 3.0, first="read")
    _alternating(s, ios, dev)
    s.idle(5.5)
    _close_session(s, dev, [p0, p1])


@scenario("failover_undelivered", "two paths; the client's link of path 1 goes down "
          "(capture on the server's side) with three requests in flight on it, one answered "
          "just before: the server answers the other two (a write and a read) into the dead "
          "link and retransmits the answers (go-back-N), never acknowledged; a read the "
          "client sends on path 1 after that never reaches the wire; when the server gives "
          "up, the client re-sends the three in buf_id order on path 0 with their buf_ids "
          "and RNBD headers (failover_cnt 3 on path 0; the write ran twice on the server); "
          "path 1 back ~31 s later", ios=4)
def _failover_undelivered(s, ios):
    p0, p1, dev = _two_paths(s)
    _alternating(s, ios, dev)
    reqs = s.requests_only([dict(op=op, offset=(512 + i) * 4096, size=4096, device_id=dev)
                       for i, op in enumerate(("write", "read", "read"))], path=p1)
    s.answer(reqs[1])                 # delivered: its permit is free again
    s.fail_path(p1, silent=C)
    s.answer(reqs[0])
    s.answer(reqs[2])
    s.io("read", 515 * 4096, 4096, device_id=dev, path=p1)   # takes the free permit
    _io_until(s, dev, lambda: _back(p1), 3.0, first="read")
    _alternating(s, ios, dev)
    s.idle(5.5)
    _close_session(s, dev, [p0, p1])


@scenario("unmap_6_12", "one path, a few IOs, unmapped as Linux 6.12 does it every time "
          "(6.1 only when the client's later DREQs come after the server's close_path()): the "
          "server answers the client's DREQ of cid 0 with its DREP, then closes the other cids "
          "with DREQs of its own; one disconnect, started by the client, answered by the "
          "server (basic: Linux 6.1's plain DREQ/DREP teardown)", ios=4)
def _unmap_6_12(s, ios):
    path, dev = _open_session(s)
    _workload(s, ios // 2, ios - ios // 2, 0, dev)
    s.idle(1.0)
    s.rnbd_close(dev)
    s.disconnect(path, crossed=True)


@scenario("reconnect_timeout", "two paths, IO round-robin; the client's link of path 1 goes "
          "down for ~25 s (capture on the server's side): the server's heartbeat is "
          "retransmitted (go-back-N) until its QP gives up, the server closes path 1 (DREQs, "
          "sent again until the link is back); each reconnect attempt gets the server's REP "
          "again for every REQ the client sends again, never completes, and ends with a "
          "client REJ Timeout, twice 60 s apart (path 1: reconnects successful 0, failed 2)",
          ios=6, failed_attempts=2)
def _reconnect_timeout(s, ios, failed_attempts):
    p0, p1, dev = _two_paths(s)
    _alternating(s, ios, dev)
    p1.faults = [{"fault": "rep_lost"} for _ in range(failed_attempts)]
    s.fail_path(p1, silent=C, restore_after=25.0)
    _io_until(s, dev, lambda: _reconnects_failed(s, p1) >= failed_attempts, 5.0)
    s.idle(2.0)
    _close_session(s, dev, [p0, p1])


@scenario("server_hb_loss", "one path; the client's link goes down right after its transport "
          "acknowledged a server heartbeat (capture on the server's side): the HB_ACK never "
          "comes, the server has nothing to retransmit, its heartbeat timer runs out six "
          "ticks later and it closes the path with DREQs, sent again every ~6 s while nobody "
          "answers; mid_session=True starts the capture after the handshake",
          ios=6, mid_session=False)
def _server_hb_loss(s, ios, mid_session):
    path, dev = _open_session(s)
    s.wait(2.0)
    since = s.t - 0.5 if mid_session else None
    _workload(s, ios // 2, ios - ios // 2, 0, dev)
    s.idle(6.0)
    s.fail_path(path, silent=C, last_heartbeat_acked=True)
    s.wait(45.0)
    return since


@scenario("reconnect_third_try", "one path; its server side goes silent with requests in "
          "flight (capture on the client's side): no path to fail over to, the requests are "
          "lost; the client closes the path; its first reconnect attempt gets no answer (REQ "
          "sent again, client REJ Timeout), the second a REJ -ECONNRESET (the server still "
          "tears the old path down), the third gets through: SESS_INFO and OPEN again, IO; "
          "unmap with crossed DREQs (the server closes cids 1 and 2 itself) — kernel: "
          "reconnects successful 1, failed 2",
          in_flight=3)
def _reconnect_third_try(s, in_flight):
    path, dev = _open_session(s)
    _workload(s, 2, 2, 0, dev)
    path.faults = [{"fault": "unanswered"},
                   {"reject": (-_errno.ECONNRESET, CM_REJ_CONSUMER)}]
    s.fail_path(path, restore_after=70.0)
    s.io_batch([dict(op="read" if i % 2 == 0 else "write", offset=(512 + i) * 4096,
                     size=4096, device_id=dev) for i in range(in_flight)], path=path)
    while path.state != "connected" or path.connects < 2:
        s.wait(5.0)
    dev = s.rnbd_map(scan_sectors=(), sess_info=True)
    _workload(s, 2, 2, 0, dev)
    s.idle(6.0)
    s.rnbd_close(dev)
    s.disconnect(path, crossed=True)


@scenario("io_errors", "IO errors: EIO on a read and a write, ENOSPC on writes, ENOTCONN for "
          "an unknown device id, ENOENT on open of a missing device")
def _io_errors(s):
    path, dev = _open_session(s)
    s.io("write", 0, 4096, device_id=dev)
    s.io("write", 4096, 4096, errno=_errno.EIO, device_id=dev)
    s.io("read", 4096, 4096, errno=_errno.EIO, device_id=dev)
    s.io("write", 8192, 4096, errno=_errno.ENOSPC, device_id=dev)
    s.io("write", 12288, 8192, errno=_errno.ENOSPC, device_id=dev)
    s.io("read", 0, 4096, errno=_errno.ENOTCONN, device_id=7)
    s.rnbd_open("/dev/nonexistent", errno=_errno.ENOENT)
    s.io("read", 0, 4096, device_id=dev)
    _close_session(s, dev, [path])


@scenario("flush_discard", "FLUSH (RTRS READ without descriptor), DISCARD and WRITE_ZEROES "
          "(RTRS WRITEs without data) between writes")
def _flush_discard(s):
    path, dev = _open_session(s)
    s.io("write", 0, 4096, device_id=dev)
    s.io("flush", 0, 0, device_id=dev)
    s.io("discard", 1 << 20, 1 << 20, device_id=dev)
    s.io("write_zeroes", 2 << 20, 65536, device_id=dev)
    s.io("write", 4096, 4096, device_id=dev, flags=RNBD_F_SYNC | RNBD_F_FUA)
    s.io("flush", 0, 0, device_id=dev)
    s.io("read", 0, 4096, device_id=dev)
    _close_session(s, dev, [path])


@scenario("mid_session", "a capture that starts after the handshake, SESS_INFO and OPEN: "
          "no CM, no INFO, no queue depth; IO, heartbeats and the close only",
          ios=8, parallel=6)
def _mid_session(s, ios, parallel):
    path, dev = _open_session(s)
    s.wait(2.0)
    since = s.t - 0.5
    _workload(s, ios // 2, ios - ios // 2, 0, dev, parallel)
    s.idle(6.0)
    _close_session(s, dev, [path])
    return since


def _reject(s, errno, reason=CM_REJ_CONSUMER, **connect):
    path = s.add_path()
    s.connect(path, reject=(-errno if errno else 0, reason), **connect)
    return path


@scenario("reject_econnreset", "the client drops its only path and reconnects at once while "
          "the server still tears the old one down: REJ -ECONNRESET; ~31 s later the retry "
          "(recon_cnt+1) gets in and RNBD re-sends SESS_INFO and OPEN")
def _rej_econnreset(s):
    path, dev = _open_session(s)
    s.io("write", 0, 4096, device_id=dev)
    s.disconnect(path)
    s.wait(0.05)
    s.connect(path, first_conn=1, reject=(-_errno.ECONNRESET, CM_REJ_CONSUMER))
    s.wait(31.0)
    s.connect(path, first_conn=1)
    dev = s.rnbd_map(scan_sectors=(), sess_info=True)
    s.io("read", 0, 4096, device_id=dev)
    _close_session(s, dev, [path])


@scenario("reject_enxio", "a path with first_conn=0 (the client believes the session exists, "
          "e.g. after a server restart) for a paths_uuid the server does not know: REJ -ENXIO")
def _rej_enxio(s):
    path = s.add_path()
    s.connect(path, first_conn=0, reject=(-_errno.ENXIO, CM_REJ_CONSUMER))


@scenario("reject_eexist", "a session is up; adding the same path again: REJ -EEXIST; the "
          "session goes on")
def _rej_eexist(s):
    path, dev = _open_session(s)
    s.io("write", 0, 4096, device_id=dev)
    dup = s.add_path(path.client.ip, path.server.ip)
    s.connect(dup, first_conn=0, reject=(-_errno.EEXIST, CM_REJ_CONSUMER))
    s.io("read", 0, 4096, device_id=dev)
    _close_session(s, dev, [path])


@scenario("reject_enomem", "server out of memory: REJ -ENOMEM")
def _rej_enomem(s):
    _reject(s, _errno.ENOMEM)


@scenario("reject_no_listener", "REQ to a port where nothing listens: CM REJ reason 8 "
          "(invalid service ID), all-zero private data")
def _rej_no_listener(s):
    path = s.add_path()
    s.connect(path, reject=(0, CM_REJ_INVALID_SID), port=1235)


@scenario("bad_magic", "conn_req with a wrong magic: REJ -ECONNRESET")
def _bad_magic(s):
    path = s.add_path()
    s.connect(path, magic=RTRS_MAGIC + 1)


@scenario("bad_version", "conn_req with protocol version 3.0: REJ -ECONNRESET")
def _bad_version(s):
    path = s.add_path()
    s.connect(path, version=(RTRS_PROTO_VER_MAJOR + 1) << 8)


@scenario("server_disconnect", "the server closes the path (DREQs from the server, client "
          "DREPs), e.g. module unload")
def _server_disconnect(s):
    path, dev = _open_session(s)
    _workload(s, 2, 2, 0, dev)
    s.disconnect(path, initiator=S)


def craft_from_truth(truth, seed=0, **params):
    """A session with the workload of a real capture's truth.json (pcaps/real/):
    same config (always_invalidate, path MTU, CPUs, addresses, session name),
    map with the partition scan, every IO of ``ios`` in order, the idle step, unmap.
    Returns (packets, truth)."""
    cfg = truth["config"]
    merged = dict(CRAFTER_PARAMS)
    merged.update(always_invalidate=bool(cfg["always_invalidate"]),
                  pmtu=int(cfg["roce_path_mtu"]), cpus=int(cfg["client_cpus"]),
                  sessname=cfg["session"])
    merged.update(params)
    s = make_crafter(seed, **merged)
    path = s.add_path(cfg["client_ip"][0], cfg["server_ip"][0])
    s.connect(path)
    dev = s.rnbd_map()
    for io in truth["ios"]:
        s.io(io["op"], io["off"], io["size"], device_id=dev, label=io.get("tag"))
    idle = [float(step["args"]) for step in truth.get("steps", []) if step["step"] == "idle"]
    s.idle(sum(idle))
    _close_session(s, dev, [path])
    packets = s.packets()
    result = s.truth(scenario="from_truth:" + str(truth.get("scenario")), params=merged)
    result["frames"] = len(packets)
    return packets, result


__all__ = ["craft_from_truth", "SCENARIOS", "craft_scenario", "craft_frames", "scenario_names", "C", "S"]
