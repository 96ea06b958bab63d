"""Compiled struct plans: the layout IR of a layer turned into one
``struct.Struct`` and generated reader functions, for decoding without
per-packet Scapy objects.

Nothing here states an offset or a size: every format is derived from the
layout IR, which ``wire.py`` holds for the layers the analysis reads (so no
Scapy import is needed).  ``plan("RtrsMsgConnReq")`` or ``plan(cls)``;
``plan(x).reader("a", "b")`` returns a function ``read(buf, off) -> (a, b)``;
``plan(x).decode(buf, off, end)`` returns every field as a dict (lists bounded
by the bytes present), as Scapy would show it; ``plan(x).column(np, b, base,
name)`` reads one field of many messages at once.
"""

import struct

from . import wire
from .ir import LayoutError

_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_SIGNED_CODES = {1: "b", 2: "h", 4: "i", 8: "q"}


class Plan:
    def __init__(self, layout):
        self.layout = layout
        self.name = layout.name
        self.size = self.layout.fixed_size
        self._slots = {}  # (offset, size) -> index in the unpacked tuple
        codes = []
        endians = {spec.endian for spec in self.layout.fields
                   if spec.kind in ("uint", "int") and spec.size > 1 and not spec.is_bits}
        endians |= {spec.endian for spec in self.layout.fields
                    if spec.is_bits and spec.size in (2, 4, 8)}
        if len(endians) > 1:
            raise LayoutError("%s mixes byte orders" % self.name)
        self.endian = endians.pop() if endians else "<"
        for spec in self.layout.fields:
            if spec.kind in ("list", "trailer") or (spec.offset, spec.size) in self._slots:
                continue
            self._slots[(spec.offset, spec.size)] = len(codes)
            codes.append(self._code(spec))
        self.struct = struct.Struct(self.endian + "".join(codes))
        if self.struct.size != self.size:
            raise LayoutError("%s: plan size %d != layout size %d"
                              % (self.name, self.struct.size, self.size))
        self._readers = {}
        self._all = None        # (names, reader, lists) of the whole message

    @staticmethod
    def _code(spec):
        if spec.kind == "uint" and spec.size in _INT_CODES:
            return _INT_CODES[spec.size]
        if spec.kind == "int" and spec.size in _SIGNED_CODES:
            return _SIGNED_CODES[spec.size]
        return "%ds" % spec.size  # byte strings, UUIDs, GIDs, 3-byte bit units

    def _expr(self, spec):
        """Python expression of a field's value from the unpacked tuple ``v``."""
        item = "v[%d]" % self._slots[(spec.offset, spec.size)]
        if spec.kind in ("uint", "int") and spec.size not in _INT_CODES:
            item = "int.from_bytes(%s, %r)" % (item, "big" if spec.endian == ">" else "little")
        if spec.is_bits:
            return "((%s >> %d) & 0x%x)" % (item, spec.shift, (1 << spec.width) - 1)
        if spec.kind == "string":
            return "_cstr(%s)" % item
        if spec.kind == "uuid":
            return "_uuid(%s)" % item
        return item

    def reader(self, *names):
        """A compiled ``read(buf, off)`` returning the named fields as a tuple."""
        if names not in self._readers:
            exprs = [self._expr(self.layout.field(name)) for name in names]
            body = "(%s,)" % ", ".join(exprs) if exprs else "()"
            source = ("def read(buf, off, _u=_unpack):\n"
                      "    v = _u(buf, off)\n"
                      "    return %s\n" % body)
            env = {"_unpack": self.struct.unpack_from, "_cstr": _cstr, "_uuid": _uuid}
            exec(compile(source, "<plan %s>" % self.name, "exec"), env)
            self._readers[names] = env["read"]
        return self._readers[names]

    def column(self, np, b, base, name):
        """One field for many messages at once: ``b`` a uint8 array, ``base`` an
        int64 array of message offsets; returns an int64 array (uint fields only;
        a 64-bit value above 2**63 comes back negative, as its bits)."""
        spec = self.layout.field(name)
        if spec.kind != "uint" or spec.size > 8:
            raise LayoutError("%s.%s: no column for %s/%d bytes"
                              % (self.name, name, spec.kind, spec.size))
        if spec.size in (1, 2, 4, 8):
            # ``b`` seen as one integer starting at each of its bytes (a view, no copy):
            # one gather reads the field of every message
            kind = np.dtype("%s%s%d" % (spec.endian, "i" if spec.size == 8 else "u",
                                        spec.size))
            every = np.ndarray((max(len(b) - spec.size + 1, 0),), dtype=kind,
                               buffer=np.ascontiguousarray(b), strides=(1,))
            value = every[base + spec.offset].astype(np.int64)
        else:
            value = np.zeros(len(base), dtype=np.uint64)
            for i in range(spec.size):
                byte = b[base + spec.offset + i].astype(np.uint64)
                if spec.endian == "<":
                    value |= byte << np.uint64(8 * i)
                else:
                    value = (value << np.uint64(8)) | byte
            value = value.view(np.int64)
        if spec.is_bits:
            value = (value >> spec.shift) & ((1 << spec.width) - 1)
        return value

    def fits(self, off, end):
        return off + self.size <= end

    def decode(self, buf, off, end):
        """All fields as a dict; lists bounded by the bytes up to ``end``."""
        if self._all is None:
            names = tuple(spec.name for spec in self.layout.fields
                          if spec.kind not in ("list", "trailer"))
            self._all = names, self.reader(*names), self.layout.lists
        names, read, lists = self._all
        values = dict(zip(names, read(buf, off)))
        for spec in lists:
            element = _plan_of(spec.element)
            start = off + self.size
            room = max(0, (end - start) // element.size)
            count = min(values[spec.count_ref], room)
            values[spec.name] = [element.decode(buf, start + i * element.size, end)
                                 for i in range(count)]
        return values


def _cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _uuid(raw):
    """The canonical text of a UUID (what ``str(uuid.UUID(bytes=raw))`` gives)."""
    h = raw.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


_PLANS = {}


def _plan_of(layout):
    if layout.name not in _PLANS:
        _PLANS[layout.name] = Plan(layout)
    return _PLANS[layout.name]


def plan(layer):
    """The (cached) Plan of a layer, by name or Scapy class."""
    name = layer if isinstance(layer, str) else layer.__name__
    layout = wire.LAYOUTS.get(name)
    if layout is None:
        if isinstance(layer, str):
            raise LayoutError("no layout for %r in wire.py" % name)
        from .from_layers import layout_of  # a layer the analysis does not read: ask Scapy
        layout = layout_of(layer)
    return _plan_of(layout)
