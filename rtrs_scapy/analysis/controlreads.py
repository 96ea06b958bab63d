"""RNBD control reads waiting for their reply, and the devices OPENs asked for.

SESS_INFO and OPEN are RTRS READs: the server's reply arrives as READ data with
the rkey of the request's descriptor (docs/PROTOCOL.md#rnbd-session-life-cycle).
io.py asks for each such read as it sees the request; the analyzer takes the
reply when the READ data comes.  An OPEN's device name is kept by the request's
frame too: a failed OPEN's error names the device (io.py).  Both are bounded,
the oldest go first.
"""

#: RNBD control reads (and OPENs' device names) kept waiting
WAITING = 256


class ControlReads:
    def __init__(self):
        self.reads = {}        # desc key -> (path id, RNBD fields, record index)
        self.opens_asked = {}          # OPEN request frame -> the device path it names

    def __len__(self):
        return len(self.reads)

    def ask(self, desc_key, path_id, fields, record, frame):
        """A SESS_INFO/OPEN read: its reply arrives as READ data with this rkey.  The
        device an OPEN asked for is kept by its frame: a failed OPEN names it."""
        if len(self.reads) >= WAITING:
            del self.reads[next(iter(self.reads))]
        self.reads[desc_key] = (path_id, fields, record)
        if fields.get("dev_name") is not None:
            if len(self.opens_asked) >= WAITING:
                del self.opens_asked[next(iter(self.opens_asked))]
            self.opens_asked[frame] = fields["dev_name"]

    def rkeys(self):
        """The rkeys whose READ data is waited for."""
        return list(self.reads)

    def waiting(self, desc_key, path_id):
        """(path id, RNBD fields, record index) of the read of ``path_id`` whose READ
        data has this rkey, or None."""
        entry = self.reads.get(desc_key)
        return None if entry is None or entry[0] != path_id else entry

    def answered(self, desc_key):
        """The read's reply came."""
        del self.reads[desc_key]

    def device_asked(self, frame):
        """The device the OPEN of ``frame`` asked for, or None."""
        return self.opens_asked.get(frame)
