"""Reading captures: byte sources, pcap/pcapng record walks, link layers.

``open_capture(path)`` gives a :class:`Capture`; ``capture.chunks()`` yields
the records as columns for the engine, iterating the capture yields one
``(frame_no, ts, buf, start, end, link_type)`` per frame.
"""

from .files import MAX_BLOCK, MAX_RECORD, Capture, CaptureError, Chunk, open_capture
from .ib import ib_offset
from .links import LINK_NAMES, SUPPORTED_LINK_TYPES, link_name

__all__ = ["Capture", "CaptureError", "Chunk", "open_capture", "ib_offset", "link_name",
           "LINK_NAMES", "SUPPORTED_LINK_TYPES", "MAX_RECORD", "MAX_BLOCK"]
