"""A path seen first without its handshake, then reconnecting inside the capture.

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

from array import array

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
    span = an.io_span.get(path.id)
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
        path.latencies[op] = array("d", list(inferred.latencies[op]) + list(path.latencies[op]))
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
    if path.always_invalidate is None:
        path.always_invalidate = inferred.always_invalidate
    _merge_span(an, inferred.id, path.id)
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
    an.rnbd_view.merge(old_session, path.session)
    if not old_session.paths:
        an.sessions = {k: s for k, s in an.sessions.items() if s is not old_session}
    if an.records is not None:
        an.records.relabel(before, path)


def _merge_span(an, from_id, to_id):
    span = an.io_span.pop(from_id, None)
    if span is None:
        return
    mine = an.io_span.get(to_id)
    an.io_span[to_id] = span if mine is None else [min(span[0], mine[0]),
                                                    max(span[1], mine[1])]
