"""The capture's own counts: frames, their time span and link layers, and what the
capture as a whole got wrong (malformed frames, CNPs, lost packets, responses no
request waited for).  The summary's ``capture`` section (summary.py) reads them;
the analyzer and the map/reduce of several files (parts.py) add to them.
"""


class CaptureCounts:
    def __init__(self, bounds):
        self.bounds = bounds
        self.frames = self.ib_frames = self.malformed = self.cnps = 0
        self.capture_lost_packets = 0      # RC packets whose PSNs no retransmission filled
        self.unmatched_responses = 0       # responses of paths without a handshake, unpaired
        self.first_ts = self.last_ts = None   # seconds (the capture's first and last frame)
        self.link_types = set()
        self.link_type = None
        self.mirrors = set()        # mirror codes of the IB frames (capture/links.py)

    def frames_seen(self, chunk, packets):
        """A chunk of frames the engine read (counted as it was made: Chunk.counts)."""
        ib_frames, link_types, mirrors = chunk.counts()
        self.frames += len(chunk)
        self.ib_frames += ib_frames
        if self.first_ts is None:
            self.first_ts = int(chunk.stamps[0]) / 1e9
            self.link_type = int(chunk.links[0])
        self.last_ts = int(chunk.stamps[-1]) / 1e9
        self.link_types.update(link_types)
        self.bounds.keep_new("mirrors", self.mirrors, mirrors)

    def file_seen(self, part):
        """The frames of one file of several mapped apart (parts.py), in time order."""
        self.frames += part.frames
        self.ib_frames += part.ib_frames
        if part.first_stamp is not None:
            if self.first_ts is None:
                self.first_ts = part.first_stamp / 1e9
                self.link_type = part.link_type
            self.last_ts = part.last_stamp / 1e9
        self.link_types.update(part.link_types)
        self.bounds.keep_new("mirrors", self.mirrors, sorted(part.mirrors))

    def unmatched_response(self):
        """A response of a path without a handshake that no request waited for."""
        self.unmatched_responses += 1
