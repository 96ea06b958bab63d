"""A Scapy session over the Analyzer: ``sniff(offline=..., session=RtrsSession)``.

Each packet goes through the same Analyzer as the CLI; the packet comes back
annotated: ``pkt.rtrs`` holds the analyzer's records for this frame (decoded
immediate, buf_id, the frame it pairs with, latency), ImmDt knows the queue
depth, and when the frame completes a multi-packet message that is kept whole,
``pkt.rtrs_message`` is that message decoded with the Scapy layers.
"""

from scapy.compat import raw
from scapy.config import conf
from scapy.sessions import DefaultSession

from ..layers.ib import ImmDt
from ..layers.rtrs import RtrsMsg
from ..layers.rtrs_request import RtrsRequest
from .analyzer import Analyzer


class RtrsSession(DefaultSession):
    def __init__(self, *args, queue_depth=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.analyzer = Analyzer(keep_messages=True, queue_depth=queue_depth)
        self.frame = 0

    def process(self, pkt):
        pkt = super().process(pkt)
        if pkt is None:
            return None
        self.frame += 1
        data = raw(pkt)
        link_type = conf.l2types.layer2num.get(type(pkt))
        an = self.analyzer
        first_new = len(an.messages)
        an.feed(self.frame, float(pkt.time), data, 0, len(data), link_type)
        pkt.rtrs = [m for m in an.messages[first_new:] if m["frame"] == self.frame]
        if ImmDt in pkt:
            path = self._path_of(pkt.rtrs)
            if path is not None and path.queue_depth:
                pkt[ImmDt].queue_depth = path.queue_depth
        completed = an.completed
        if completed and completed[0] == self.frame and completed[1] is not None \
                and completed[1].whole and completed[1].packets > 1:
            message = completed[1].data()
            pkt.rtrs_message = RtrsMsg(message) if completed[2] else RtrsRequest(message)
        return pkt

    def _path_of(self, records):
        for record in records:
            for path in self.analyzer.paths.values():
                if {record["src"], record["dst"]} == {self.analyzer.text(path.client_raw),
                                                      self.analyzer.text(path.server_raw)}:
                    return path
        return None

    def summary(self):
        """The JSON-shaped summary of everything processed so far."""
        from .summary import summarize
        self.analyzer.close()
        return summarize(self.analyzer, {"path": None, "format": "scapy",
                                         "link_type": None, "truncated": False})
