"""Names of paths and devices as the analyzer knows them at a given moment.

IO rows carry path ids and RNBD device ids; the tables carry names.  A path's
names come from its handshake and info exchange, a device's from the OPEN and
its reply; RNBD device ids are session-wide, so a device opened on one path
names the IO of every path of the session.
"""

#: what a path is known by, in the tables' column order
PATH_COLUMNS = ("session", "paths_uuid", "sess_uuid", "client", "server")


def path_names(path):
    """(session, paths_uuid, sess_uuid, client, server) of a model Path."""
    session = path.session
    return (session.label if session is not None else None,
            session.paths_uuid if session is not None else path.paths_uuid,
            path.sess_uuid, path.client, path.server)


def session_devices(path):
    """{device_id: name} of the path's session (every path's OPENs)."""
    session = path.session
    if session is None:
        return dict(path.devices)
    devices = {}
    for member in session.paths:
        devices.update(member.devices)
    return devices


#: the names of a path the analyzer does not know
UNNAMED = (None,) * len(PATH_COLUMNS)


class Names:
    """Lookups by path id over an analyzer (or None: nothing is known yet)."""

    def __init__(self, analyzer=None):
        self.analyzer = analyzer

    def _entry(self, path_id):
        """(names, session devices) of the path, None when there is none."""
        paths = self.analyzer.path_list if self.analyzer is not None else ()
        if 0 <= path_id < len(paths) and paths[path_id] is not None:
            return path_names(paths[path_id]), session_devices(paths[path_id])
        return None

    def path(self, path_id):
        entry = self._entry(path_id)
        return entry[0] if entry is not None else UNNAMED

    def device(self, path_id, device_id):
        entry = self._entry(path_id)
        return entry[1].get(device_id) if entry is not None and device_id >= 0 else None


class KnownNames(Names):
    """What :class:`Names` answers at the end of an analysis, kept apart from it: an
    export names its rows by them after it has let go of the analysis."""

    def __init__(self, analyzer):
        super().__init__()
        live = Names(analyzer)
        self.entries = [live._entry(path_id) for path_id in range(len(analyzer.path_list))]

    def _entry(self, path_id):
        return self.entries[path_id] if 0 <= path_id < len(self.entries) else None
