"""The layout IR: what a field list says about the wire, as plain data.

``from_layers.py`` builds it from Scapy's ``fields_desc``; the generated
``wire.py`` holds it for every layer the engine reads, so that the engine,
the plans and the CM tracker run without importing Scapy.
"""

from dataclasses import dataclass, field
from typing import Optional, Tuple


class LayoutError(Exception):
    pass


@dataclass(frozen=True)
class FieldSpec:
    """One field on the wire.

    For bit fields, ``offset``/``size``/``endian`` describe the storage unit
    and ``shift``/``width`` the bits inside it (shift counted from the LSB).
    """
    name: str
    offset: int
    size: int
    kind: str                       # uint int bytes string uuid ipv6 list trailer
    endian: str = ""                # "<", ">" or "" for byte strings
    display: str = "dec"            # dec hex uuid ipv6 string bytes
    shift: Optional[int] = None
    width: Optional[int] = None
    enum: Optional[str] = None      # name in ENUM_TABLES
    flags: Optional[str] = None     # name in ENUM_TABLES of a bit-flag table
    mask: Optional[int] = None      # for a field holding an enum in some bits (rnbd rw)
    count_ref: Optional[str] = None  # list: name of the count field
    element: Optional["Layout"] = None  # list: layout of one element

    @property
    def is_bits(self):
        return self.width is not None


@dataclass(frozen=True)
class Layout:
    name: str                        # Scapy class name
    fields: Tuple[FieldSpec, ...]
    fixed_size: int                  # bytes before any counted list
    trailer_size: int = 0            # FCS-like trailer fields (ICRC, VCRC)
    element_size: Optional[int] = None  # size of a list element (when it has one list)
    fingerprint: str = field(default="", compare=False)
    cls: type = field(default=None, compare=False, repr=False)  # the Scapy class

    def field(self, name):
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise KeyError("%s has no field %r" % (self.name, name))

    @property
    def lists(self):
        return [spec for spec in self.fields if spec.kind == "list"]
