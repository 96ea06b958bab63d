"""One name per session, and what ``--session`` and ``--device`` may say.

A session is called by its name (the client's sessname) when the handshake was
captured; otherwise by a short label that stays the same from run to run (the
first 8 hex digits of its paths_uuid, else of a path's sess_uuid, else its first
path).  Every command prints that label and every ``--session`` accepts it, the
name, the uuids, or a unique prefix of any of them.
"""

from collections import Counter

SHORT = 8   # hex digits of a uuid that name an unnamed session


def session_label(sessname, paths_uuid, sess_uuids, first_path):
    """The session's one name; ``first_path``: (client, server) or None."""
    if sessname:
        return sessname
    for uuid in (paths_uuid, *sess_uuids):
        if uuid:
            return uuid[:SHORT]
    if first_path is not None:
        return "%s→%s" % first_path
    return "(no handshake)"


def unique_labels(labels, paths_uuids):
    """Two sessions of one name (a session mapped again, a new paths_uuid) are told
    apart by their paths_uuid's first digits."""
    times = Counter(labels)
    out = list(labels)
    for i, label in enumerate(labels):
        if times[label] > 1 and paths_uuids[i]:
            out[i] = "%s %s" % (label, paths_uuids[i][:SHORT])
    return out


def summary_label(session):
    """The label of a summary's session (its ``label``, or as the summary would say)."""
    if session.get("label"):
        return session["label"]
    paths = session["paths"]
    return session_label(session["sessname"], session["paths_uuid"],
                         [p["sess_uuid"] for p in paths],
                         (paths[0]["client"], paths[0]["server"]) if paths else None)


def session_identity(session):
    """What this module and the message lines read of a summary's session (its names,
    its paths' ids and its devices' names): what a reader that only names sessions
    and devices keeps of each of a capture's thousands."""
    devices = (session.get("rnbd") or {}).get("devices")
    return {
        "sessname": session["sessname"], "paths_uuid": session["paths_uuid"],
        "label": session.get("label"),
        "paths": [{"sess_uuid": p["sess_uuid"], "client": p["client"], "server": p["server"],
                   "devices": p.get("devices", {}),
                   "errors": [e for e in p["errors"] if e.get("rnbd") == "open"]}
                  for p in session["paths"]],
        "rnbd": {"devices": None if devices is None else {
            k: {"name": d.get("name"), "client_name": d.get("client_name")}
            for k, d in devices.items()}},
    }


def session_keys(session):
    """Everything ``--session`` may say of a summary's session, exactly."""
    keys = [summary_label(session), session["sessname"], session["paths_uuid"]]
    keys += [p["sess_uuid"] for p in session["paths"]]
    return [k for k in keys if k]


def match_sessions(sessions, wanted):
    """The indexes of the summary sessions ``wanted`` names: exactly (a name may be
    shared: a session mapped again), else by a prefix of one session only;
    LookupError with the sessions known when there is none or several."""
    exact = [i for i, s in enumerate(sessions) if wanted in session_keys(s)]
    if exact:
        return exact
    found = [i for i, s in enumerate(sessions)
             if any(k.startswith(wanted) for k in session_keys(s))]
    if len(found) == 1:
        return found
    raise LookupError("%s session %r in the capture; its sessions: %s" % (
        "no" if not found else "more than one", wanted,
        known_sessions([sessions[i] for i in found] or sessions)))


def known_sessions(sessions):
    """The sessions as an error message lists them: label, paths_uuid, sess_uuids."""
    if not sessions:
        return "none"
    out = []
    for s in sessions:
        ids = ["paths_uuid " + s["paths_uuid"]] if s["paths_uuid"] else []
        ids += ["sess_uuid " + p["sess_uuid"] for p in s["paths"] if p["sess_uuid"]]
        out.append("%s: %s" % (summary_label(s), ", ".join(ids) or "handshake not captured"))
    return "; ".join(out)


def device_entries(sessions):
    """(session index, device id or None, server path, client name) of every device a
    summary knows: the opened ones, and the paths of failed OPENs (no id)."""
    out = []
    for index, session in enumerate(sessions):
        known = set()
        for key, device in sorted(((session.get("rnbd") or {}).get("devices") or {}).items(),
                                  key=lambda kv: int(kv[0])):
            out.append((index, int(key), device.get("name"), device.get("client_name")))
            known.add(device.get("name"))
        for path in session["paths"]:
            for key, name in path.get("devices", {}).items():
                if name not in known:
                    out.append((index, int(key), name, None))
                    known.add(name)
            for err in path["errors"]:
                if err.get("rnbd") == "open" and err.get("device") not in known | {None}:
                    out.append((index, None, err["device"], None))
                    known.add(err["device"])
    return out


def match_device(sessions, wanted):
    """The device entries ``wanted`` names (its id, the server's path, the client's
    name); LookupError listing the known devices when none."""
    found = [e for e in device_entries(sessions)
             if wanted in (None if e[1] is None else str(e[1]), e[2], e[3])]
    if found:
        return found
    raise LookupError("no device %r in the capture; its devices: %s"
                      % (wanted, known_devices(sessions)))


def known_devices(sessions):
    """The devices as an error message lists them: id, path, client name, session."""
    out = []
    for index, device_id, path, client in device_entries(sessions):
        words = [str(device_id)] if device_id is not None else []
        words += [w for w in (path, client and "(%s)" % client) if w]
        out.append("%s in %s" % (" ".join(words), summary_label(sessions[index])))
    return ", ".join(out) or "none"


def apply_device_map(sessions, mapping):
    """``mapping``: (client name, server path, session or None) as ``--device-map
    rnbd0=/dev/loop0@lab1`` gives them; each names the device it finds.  LookupError
    when the path (in that session) is not in the capture."""
    for client, path, session in mapping:
        wanted = None if session is None else match_sessions(sessions, session)
        hits = [(i, d) for i, d, p, _ in device_entries(sessions)
                if p == path and (wanted is None or i in wanted)
                and str(d) in ((sessions[i].get("rnbd") or {}).get("devices") or {})]
        if not hits:
            raise LookupError("--device-map %s=%s%s: no such device in the capture; its "
                              "devices: %s" % (client, path, "@" + session if session else "",
                                               known_devices(sessions)))
        for index, device_id in hits:
            sessions[index]["rnbd"]["devices"][str(device_id)]["client_name"] = client
