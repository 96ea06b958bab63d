"""Compiled struct plans: the layout IR of a Scapy layer turned into one
``struct.Struct`` and generated reader functions, for bulk decoding without
per-packet Scapy objects.

Nothing here states an offset or a size: every format is derived from
``layout_of(cls)``.  ``plan(cls).reader("a", "b")`` returns a function
``read(buf, off) -> (a, b)``; ``plan(cls).decode(buf, off, end)`` returns every
field as a dict (lists bounded by the bytes present), as Scapy would show it.
"""

import struct
import uuid

from ..layout import LayoutError, layout_of

_INT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_SIGNED_CODES = {1: "b", 2: "h", 4: "i", 8: "q"}


class Plan:
    def __init__(self, cls):
        self.cls = cls
        self.layout = layout_of(cls)
        self.size = self.layout.fixed_size
        self._slots = {}  # (offset, size) -> index in the unpacked tuple
        codes = []
        endians = {spec.endian for spec in self.layout.fields
                   if spec.kind in ("uint", "int") and spec.size > 1 and not spec.is_bits}
        endians |= {spec.endian for spec in self.layout.fields
                    if spec.is_bits and spec.size in (2, 4, 8)}
        if len(endians) > 1:
            raise LayoutError("%s mixes byte orders" % cls.__name__)
        self.endian = endians.pop() if endians else "<"
        for spec in self.layout.fields:
            if spec.kind in ("list", "trailer") or (spec.offset, spec.size) in self._slots:
                continue
            self._slots[(spec.offset, spec.size)] = len(codes)
            codes.append(self._code(spec))
        self.struct = struct.Struct(self.endian + "".join(codes))
        if self.struct.size != self.size:
            raise LayoutError("%s: plan size %d != layout size %d"
                              % (cls.__name__, self.struct.size, self.size))
        self._readers = {}

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
            exec(compile(source, "<plan %s>" % self.cls.__name__, "exec"), env)
            self._readers[names] = env["read"]
        return self._readers[names]

    def column(self, np, b, base, name):
        """One field for many messages at once: ``b`` a uint8 array, ``base`` an
        int64 array of message offsets; returns an int64 array (uint fields only)."""
        spec = self.layout.field(name)
        if spec.kind != "uint" or spec.size > 7:
            raise LayoutError("%s.%s: no column for %s/%d bytes"
                              % (self.cls.__name__, name, spec.kind, spec.size))
        value = np.zeros(len(base), dtype=np.int64)
        for i in range(spec.size):
            byte = b[base + spec.offset + i].astype(np.int64)
            if spec.endian == "<":
                value |= byte << (8 * i)
            else:
                value = (value << 8) | byte
        if spec.is_bits:
            value = (value >> spec.shift) & ((1 << spec.width) - 1)
        return value

    def fits(self, off, end):
        return off + self.size <= end

    def decode(self, buf, off, end):
        """All fields as a dict; lists bounded by the bytes up to ``end``."""
        names = tuple(spec.name for spec in self.layout.fields
                      if spec.kind not in ("list", "trailer"))
        values = dict(zip(names, self.reader(*names)(buf, off)))
        for spec in self.layout.lists:
            element = plan(spec.element.cls)
            start = off + self.size
            room = max(0, (end - start) // element.size)
            count = min(values[spec.count_ref], room)
            values[spec.name] = [element.decode(buf, start + i * element.size, end)
                                 for i in range(count)]
        return values


def _cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _uuid(raw):
    return str(uuid.UUID(bytes=bytes(raw)))


_PLANS = {}


def plan(cls):
    """The (cached) Plan of a Scapy layer class."""
    if cls not in _PLANS:
        _PLANS[cls] = Plan(cls)
    return _PLANS[cls]
