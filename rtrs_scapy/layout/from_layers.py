"""Scapy ``fields_desc`` → a small layout IR, the one map from Scapy field
classes to wire kinds.

The plans (plans.py, through the generated wire.py) and the Wireshark
generator read only this IR, so every offset, size, endianness, enum and count has a single source: the
Scapy layers.  A field class the IR does not know, or a count it cannot name,
raises ``LayoutError`` at import/generation time instead of being guessed.
"""

import hashlib
from scapy import fields as F

from ..spec import constants
from ..layers import cm, ib, rnbd, rtrs
from .ir import FieldSpec, Layout, LayoutError  # noqa: F401 (re-exported)
from ..layers.refs import ref


# Scapy field class -> (kind, size in bytes, endian, display); searched along the MRO.
_SCALARS = {
    F.ByteField: ("uint", 1, ">", "dec"),
    F.XByteField: ("uint", 1, ">", "hex"),
    F.ShortField: ("uint", 2, ">", "dec"),
    F.XShortField: ("uint", 2, ">", "hex"),
    F.IntField: ("uint", 4, ">", "dec"),
    F.XIntField: ("uint", 4, ">", "hex"),
    F.LongField: ("uint", 8, ">", "dec"),
    F.XLongField: ("uint", 8, ">", "hex"),
    F.LEShortField: ("uint", 2, "<", "dec"),
    F.XLEShortField: ("uint", 2, "<", "hex"),
    F.LESignedShortField: ("int", 2, "<", "dec"),
    F.LEIntField: ("uint", 4, "<", "dec"),
    F.XLEIntField: ("uint", 4, "<", "hex"),
    F.LELongField: ("uint", 8, "<", "dec"),
    F.XLELongField: ("uint", 8, "<", "hex"),
    F.ByteEnumField: ("uint", 1, ">", "dec"),
    F.ShortEnumField: ("uint", 2, ">", "dec"),
    F.IntEnumField: ("uint", 4, ">", "dec"),
    F.LEShortEnumField: ("uint", 2, "<", "dec"),
    F.LEIntEnumField: ("uint", 4, "<", "dec"),
    F.UUIDField: ("uuid", 16, "", "uuid"),
    F.IP6Field: ("ipv6", 16, "", "ipv6"),
}
_LE_LEN_FIELDS = {"<H": ("uint", 2, "<"), "<I": ("uint", 4, "<"), "!H": ("uint", 2, ">"),
                  "H": ("uint", 2, ">"), "B": ("uint", 1, ">")}

#: Enum tables by name; a field's enum is named by the table it equals.
ENUM_TABLES = {
    "rtrs_msg_types": constants.rtrs_msg_types,
    "rtrs_msg_flags": constants.rtrs_msg_flags,
    "rtrs_imm_types": constants.rtrs_imm_types,
    "rnbd_msg_type": constants.rnbd_msg_type,
    "rnbd_access_mode": constants.rnbd_access_mode,
    "rnbd_io_op": constants.rnbd_io_op,
    "rnbd_io_flags": constants.rnbd_io_flags,
    "rnbd_cache_policy": constants.rnbd_cache_policy,
    "ib_opcodes": ib.BTH.fields_desc[0].i2s,
    "lrh_next_headers": ib.lrh_next_headers,
    "cm_attribute_ids": cm.cm_attribute_ids,
    "cm_msg_kinds": cm.msg_kinds,
    "cm_mraed_kinds": cm.mraed_kinds,
    "cma_ip_versions": cm.cma_ip_versions,
    "cm_rej_reasons": cm.cm_rej_reasons,
    "mgmt_classes": cm.mgmt_classes,
    "path_mtus": cm.path_mtus,
    "transport_service_types": cm.transport_service_types,
}


def _enum_name(table, what):
    if not table:
        return None
    for name, known in ENUM_TABLES.items():
        if dict(known) == dict(table):
            return name
    raise LayoutError("%s: enum table not in layout.ENUM_TABLES: %r" % (what, table))


def _flags_name(fld, what):
    names = fld.names if isinstance(fld.names, list) else list(fld.names)
    table = {1 << i: n for i, n in enumerate(names) if not n.startswith("bit_")}
    return _enum_name(table, what)


def _scalar(fld):
    for klass in type(fld).__mro__:
        if klass in _SCALARS:
            return _SCALARS[klass]
    return None


def _field_spec(cls, fld, offset):
    """FieldSpec of a non-bit field at ``offset``, or raise."""
    what = "%s.%s" % (cls.__name__, fld.name)
    if isinstance(fld, F.TrailerField):
        endian = "<" if fld.fld.fmt.startswith("<") else ">"
        return FieldSpec(fld.name, -1, fld.fld.sz, "trailer", endian, "hex")
    if isinstance(fld, F.PacketListField):
        count = getattr(fld, "count_from", None)
        if not isinstance(count, ref):
            raise LayoutError("%s: list count must be a refs.ref" % what)
        element = layout_of(fld.cls)
        return FieldSpec(fld.name, offset, element.fixed_size, "list",
                         count_ref=count.name, element=element)
    if isinstance(fld, F.FlagsField):
        size = abs(fld.size) // 8
        endian = "<" if fld.rev else ">"
        return FieldSpec(fld.name, offset, size, "uint", endian, "hex",
                         flags=_flags_name(fld, what))
    if isinstance(fld, F.StrFixedLenField):
        size = getattr(fld, "sz", None)
        if size is None:
            raise LayoutError("%s: string without a fixed length" % what)
        kind = "string" if getattr(fld, "c_string", False) else "bytes"
        return FieldSpec(fld.name, offset, size, kind, "", kind)
    if isinstance(fld, F.FieldLenField) and type(fld) not in _SCALARS:
        kind, size, endian = _LE_LEN_FIELDS[fld.fmt]
        return FieldSpec(fld.name, offset, size, kind, endian, "dec")
    scalar = _scalar(fld)
    if scalar is None:
        raise LayoutError("%s: field class %s has no layout mapping"
                          % (what, type(fld).__name__))
    kind, size, endian, display = scalar
    enum = None
    if isinstance(fld, F._EnumField):
        enum = _enum_name(fld.i2s, what)
    if hasattr(fld, "op_mask"):  # an operation in the low bits, flags above (rnbd rw)
        return FieldSpec(fld.name, offset, size, kind, endian, "hex",
                         enum=_enum_name(fld.ops, what), mask=fld.op_mask,
                         flags=_enum_name(fld.flags, what))
    return FieldSpec(fld.name, offset, size, kind, endian, display, enum=enum)


def _bit_group(cls, group, offset):
    total = sum(fld.size for fld in group)
    if total % 8:
        raise LayoutError("%s: bit fields %s do not fill whole bytes"
                          % (cls.__name__, [f.name for f in group]))
    size = total // 8
    specs, used = [], 0
    for fld in group:
        used += fld.size
        enum = _enum_name(fld.i2s, cls.__name__) if isinstance(fld, F._EnumField) else None
        display = "hex" if isinstance(fld, F.XBitField) else "dec"
        specs.append(FieldSpec(fld.name, offset, size, "uint", ">", display,
                               shift=total - used, width=fld.size, enum=enum))
    return specs, size


#: Every header and message the project decodes, in the order of docs/PROTOCOL.md.
DECODED = (
    ib.GRH, ib.BTH, ib.RETH, ib.ImmDt, ib.IETH, ib.DETH, ib.RDETH, ib.AETH, ib.AtomicETH,
    ib.AtomicAckETH, ib.CNPPadding, ib.LRH,
    cm.MAD, cm.CMReq, cm.CMRep, cm.CMRej, cm.CMRtu, cm.CMDreq, cm.CMDrep, cm.CMMra,
    cm.CmaIpHdr,
    rtrs.RtrsMsgConnReq, rtrs.RtrsMsgConnRsp, rtrs.RtrsMsgInfoReq, rtrs.RtrsMsgInfoRsp,
    rtrs.RtrsSgDesc, rtrs.RtrsMsgRkeyRsp, rtrs.RtrsMsgRdmaHdr, rtrs.RtrsMsgRdmaRead,
    rtrs.RtrsMsgRdmaWrite,
    rnbd.RnbdMsgHdr, rnbd.RnbdMsgSessInfo, rnbd.RnbdMsgSessInfoRsp, rnbd.RnbdMsgOpen,
    rnbd.RnbdMsgOpenRsp, rnbd.RnbdMsgClose, rnbd.RnbdMsgIo,
)

_CACHE = {}


def layout_of(cls):
    """The Layout of a Scapy layer class (cached)."""
    if cls in _CACHE:
        return _CACHE[cls]
    specs, offset, group, trailer = [], 0, [], 0
    variable = False
    for fld in cls.fields_desc:
        if isinstance(fld, F._BitField) and not isinstance(fld, F.FlagsField):
            group.append(fld)
            if sum(f.size for f in group) % 8 == 0:
                bit_specs, size = _bit_group(cls, group, offset)
                specs.extend(bit_specs)
                offset += size
                group = []
            continue
        if group:
            raise LayoutError("%s: bit fields end mid-byte before %s"
                              % (cls.__name__, fld.name))
        if variable:
            raise LayoutError("%s: field %s after a variable-length list"
                              % (cls.__name__, fld.name))
        spec = _field_spec(cls, fld, offset)
        specs.append(spec)
        if spec.kind == "trailer":
            trailer += spec.size
        elif spec.kind == "list":
            variable = True
        else:
            offset += spec.size
    if group:
        raise LayoutError("%s: trailing bit fields do not fill a byte" % cls.__name__)
    lists = [s for s in specs if s.kind == "list"]
    layout = Layout(cls.__name__, tuple(specs), offset, trailer,
                    lists[0].element.fixed_size if lists else None)
    layout = Layout(layout.name, layout.fields, layout.fixed_size, layout.trailer_size,
                    layout.element_size, _fingerprint(layout), cls)
    _CACHE[cls] = layout
    return layout


def _fingerprint(layout):
    """Short hash of the wire layout, like pymavlink's crc_extra."""
    text = repr([(s.name, s.offset, s.size, s.kind, s.endian, s.shift, s.width,
                  s.count_ref, s.element.fingerprint if s.element else None)
                 for s in layout.fields])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def fingerprint_of(classes):
    """One fingerprint over several layouts (for the generated Lua banner)."""
    joined = ",".join(layout_of(c).fingerprint for c in classes)
    return hashlib.sha1(joined.encode()).hexdigest()[:12]
