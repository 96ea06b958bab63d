"""Paths seen without their handshake, linked to what the capture tells of them.

Two paths of one session: a failover shows it (``link_by_failover``, below).

A path seen first without its handshake, then reconnecting inside the capture.

A production capture starts mid-session, so the analyzer first knows a path only
by its two addresses (an inferred path).  When that path reconnects, its CM REQs
name the session, and the analyzer sees a second, handshake path between the same
addresses.  The kernel counts both phases on one path (stats/rdma survives a
reconnect), so the two are one path when the evidence is unambiguous
(docs/PROTOCOL.md#captures-that-start-mid-session):

- exactly one handshake path joins the inferred path's two addresses, in the same
  client → server direction;
- its first connect attempt is a reconnect: ``recon_cnt`` above 1 (the client
  starts every path at 1, rtrs-clt.c init_path(), and raises it per attempt), so
  the path lived before the capture;
- the inferred path is quiet by then: the kernel closes a path's connections
  before it reconnects, so no traffic of the inferred path follows the first REQ;
- the RNBD device ids carry on: the ids (and the names, where known) the inferred
  path used are among the handshake path's, or one of the two used none.

Otherwise the two stay apart and the inferred path says why (``link``).
"""

import numpy as np

from ..spec.constants import RNBD_MSG_IO
from .growing import Growing

def link_reconnected(an):
    """Merge every inferred path into the handshake path it continues; returns the
    number merged.  Run at the end of the capture, before the last IO rows."""
    merged = 0
    for inferred in [p for p in an.live() if _is_inferred(p)]:
        candidates = [p for p in an.live()
                      if p.sess_uuid is not None and p.linked_to is None
                      and (p.client_raw, p.server_raw)
                      == (inferred.client_raw, inferred.server_raw)]
        if not candidates:
            continue
        reason = _refusal(an, inferred, candidates)
        if reason is not None:
            inferred.link = {"merged": False, "candidate": candidates[0].sess_uuid,
                             "reason": reason}
            continue
        _merge(an, inferred, candidates[0])
        merged += 1
    return merged


def _is_inferred(path):
    return path.sess_uuid is None and path.linked_to is None and path.client_raw is not None


def _refusal(an, inferred, candidates):
    """Why the inferred path is not the handshake path's past, or None."""
    if len(candidates) > 1:
        return "%d handshake paths between the same addresses" % len(candidates)
    path = candidates[0]
    first = path.attempts[0] if path.attempts else None
    if first is None or (first.recon_cnt or 0) <= 1:
        return "the handshake path starts fresh (recon_cnt %s): a new path" % (
            first.recon_cnt if first is not None else "unknown")
    last = _last_activity(an, inferred)
    if last is not None and last[0] > first.time:
        return "the inferred path carries traffic after the reconnect (frame %s)" % last[1]
    before, after = _device_names(an, inferred), _device_names(an, path)
    if before and after:
        if not set(before) & set(after):
            return "no RNBD device id in common (%s before, %s after)" % (
                _ids(before), _ids(after))
        for device_id in set(before) & set(after):
            if None not in (before[device_id], after[device_id]) \
                    and before[device_id] != after[device_id]:
                return "device %d is %s before and %s after" % (
                    device_id, before[device_id], after[device_id])
    return None


def _last_activity(an, path):
    """(time, frame) of the path's last request or heartbeat, by time."""
    seen = list(path.heartbeat_seen.values())
    span = an.io_spans.of(path.id)
    if span is not None:
        seen.append((span[1][1], span[1][0] / 1e9))
    if not seen:
        return None
    frame, time = max(seen, key=lambda item: item[1])
    return time, int(frame)


def _device_names(an, path):
    """RNBD device id -> name (None when not captured) the path's session used."""
    names = dict.fromkeys(an.rnbd_view.device_ids(path.session))
    for device_id, name in path.devices.items():
        names[device_id] = name
    return names


def _ids(names):
    return ",".join(str(i) for i in sorted(names))


def _merge(an, inferred, path):
    """The inferred path's counters into ``path``; it keeps its id (IO rows carry
    it) and takes the handshake path's names."""
    last = _last_activity(an, inferred)
    old_session = inferred.session
    an.abort_pending(inferred)          # the reconnect ended what was in flight
    for op, counter in inferred.io.items():
        mine = path.io[op]
        mine.count += counter.count
        mine.bytes += counter.bytes
        mine.errors += counter.errors
        merged = Growing(times=True)
        for latencies in (inferred.latencies[op], path.latencies[op]):
            merged.extend(latencies.values())
        path.latencies[op] = merged
    for key, value in inferred.heartbeats.items():
        path.heartbeats[key] += value
    for key, value in inferred.transport.items():
        path.transport[key] += value
    for name in ("rkey_refreshes", "failovers", "aborted", "partial_requests",
                 "header_only_requests", "responses_without_request", "rtrs_packets"):
        setattr(path, name, getattr(path, name) + getattr(inferred, name))
    path.failover_delays = inferred.failover_delays + path.failover_delays
    for name in ("errors", "disconnects", "outages", "heartbeats_lost", "stalls", "events"):
        setattr(path, name, getattr(inferred, name) + getattr(path, name))
    path.devices = {**inferred.devices, **path.devices}
    if inferred.down is not None and path.down is None and path.up is not True:
        # down before its reconnect attempts (a disconnect): the outage they tried to end
        path.down = dict(inferred.down, outage=inferred.down["outage"] or any(
            a.reconnect for a in path.attempts))
    if path.always_invalidate is None:
        path.always_invalidate = inferred.always_invalidate
    an.io_spans.merge(inferred.id, path.id)
    inferred.linked_to = path
    before = (None, inferred.client, inferred.server)
    path.link = {"merged": True,
                 "inferred_first_frame": inferred.first_traffic,
                 "inferred_last_frame": last[1] if last else None,
                 "reason": "same addresses, reconnect (recon_cnt %d) after the inferred "
                           "path went quiet, RNBD device ids carry on"
                           % path.attempts[0].recon_cnt}
    for name in ("sess_uuid", "paths_uuid", "client", "server", "session"):
        setattr(inferred, name, getattr(path, name))
    old_session.paths.remove(inferred)
    merge_sessions(an, path.session, old_session)   # its session's other paths come along
    if an.records is not None:
        an.records.relabel(before, path)


# -- two inferred paths of one session ------------------------------------------------

def link_by_failover(an, new, header):
    """Sessions of paths without a handshake are one when a request of one repeats a
    request of the other that is still pending or whose answer was not acknowledged: the
    same buf_id and the same ``header`` columns (the RNBD IO header: operation, device,
    sector, size), as the kernel's copy of a failed-over request does (docs/PROTOCOL.md#captures-that-start-mid-session).
    Before the pairing of ``new`` (a request table), so that the failover is found;
    returns whether sessions were merged (``new["sess"]`` is then updated)."""
    paths = an.path_list
    if not an.registry.inferred:
        return False
    mine = new["rnbd_type"] == RNBD_MSG_IO
    originals = [{c: int(an.carry[c][k]) for c in header + ("sess", "key", "path")}
                 for k in np.flatnonzero(np.isin(an.carry["key"], new["key"][mine])
                                         & np.isin(an.carry["sector"],
                                                   new["sector"][mine])).tolist()]
    originals += [entry["request"] for entry in an.failover_state.undelivered.values()]
    if not originals:
        return False
    by_key = {}
    for old in originals:
        by_key.setdefault((old["key"],) + tuple(old[c] for c in header), []).append(old)
    merged = False
    for k in np.flatnonzero(mine).tolist():
        found = by_key.get((int(new["key"][k]),) + tuple(int(new[c][k]) for c in header), ())
        for old in found:
            mine_session = paths[int(new["path"][k])].session
            other = paths[old["path"]].session
            if other is mine_session or None not in (other.paths_uuid, mine_session.paths_uuid):
                continue
            keep, gone = (other, mine_session) if other.paths_uuid is not None \
                or mine_session.paths_uuid is None else (mine_session, other)
            merge_sessions(an, keep, gone)
            merged = True
    if merged:
        new["sess"] = an.session_of(new["path"])
    return merged


def unlinked(an):
    """Whether two sessions may still prove to be one (one of them without a handshake)."""
    return len(an.sessions) > 1 and an.registry.inferred > 0


def link_undelivered(an, table, x, header):
    """Request ``x`` of a pairing table re-sends an answer not acknowledged of another
    session (same buf_id and ``header`` columns, another path), one of the two sessions
    without a handshake: they are one (as ``link_by_failover``, for an original paired
    in the same batch as its copy).  ``table["sess"]`` follows; returns whether merged."""
    paths = an.path_list
    key, path = int(table["key"][x]), int(table["path"][x])
    mine = paths[path].session
    for (_, other_key), entry in an.failover_state.undelivered.items():
        old = entry["request"]
        other = paths[old["path"]].session
        if other_key != key or old["path"] == path or other is mine \
                or None not in (other.paths_uuid, mine.paths_uuid) \
                or any(old[c] != table[c][x] for c in header):
            continue
        keep, gone = (other, mine) if other.paths_uuid is not None \
            or mine.paths_uuid is None else (mine, other)
        old_id, new_id = an.session_ids.get(gone), an.session_ids.get(keep)
        merge_sessions(an, keep, gone)
        if None not in (old_id, new_id):
            table["sess"][table["sess"] == old_id] = new_id
        return True
    return False


def merge_sessions(an, keep, gone):
    """``gone``'s paths, RNBD view and pairing key into ``keep``: one session."""
    if gone is keep:
        return
    for path in gone.paths:
        path.session = keep
        keep.paths.append(path)
    gone.paths = []
    if keep.sessname is None:
        keep.sessname = gone.sessname
    an.rnbd_view.merge(gone, keep)
    old_id, new_id = an.registry.drop_session(gone), an.session_ids.get(keep)
    if old_id is None or new_id is None:
        return
    an.pending.rename_session(old_id, new_id)
    an.failover_state.rename_session(old_id, new_id)
