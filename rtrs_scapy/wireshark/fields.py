"""The ProtoFields of the generated dissector: one LuaField per layout field
(from the layout IR of the Scapy layers) and per runtime field.  The manifest is
what generate.py declares and what the tests and wireshark/README.md list."""

import os
from dataclasses import dataclass
from typing import Optional

from ..layers import rnbd, rtrs
from ..layout.from_layers import ENUM_TABLES, layout_of


#: (protocol, message name, Scapy class): one Lua dissect function each.
MESSAGES = (
    ("rtrs", "conn_req", rtrs.RtrsMsgConnReq),
    ("rtrs", "conn_rsp", rtrs.RtrsMsgConnRsp),
    ("rtrs", "info_req", rtrs.RtrsMsgInfoReq),
    ("rtrs", "info_rsp", rtrs.RtrsMsgInfoRsp),
    ("rtrs", "sg_desc", rtrs.RtrsSgDesc),
    ("rtrs", "rkey_rsp", rtrs.RtrsMsgRkeyRsp),
    ("rtrs", "rdma_read", rtrs.RtrsMsgRdmaRead),
    ("rtrs", "rdma_write", rtrs.RtrsMsgRdmaWrite),
    ("rnbd", "sess_info", rnbd.RnbdMsgSessInfo),
    ("rnbd", "sess_info_rsp", rnbd.RnbdMsgSessInfoRsp),
    ("rnbd", "open", rnbd.RnbdMsgOpen),
    ("rnbd", "open_rsp", rnbd.RnbdMsgOpenRsp),
    ("rnbd", "close", rnbd.RnbdMsgClose),
    ("rnbd", "io", rnbd.RnbdMsgIo),
)

#: Fields owned by the runtime (not from a layout): abbrev, Lua type, label, base, enum.
RUNTIME_FIELDS = (
    ("rtrs.imm", "uint32", "Immediate", "base.HEX", None),
    ("rtrs.imm.type", "uint8", "Immediate type", "base.DEC", "rtrs_imm_types"),
    ("rtrs.imm.buf_id", "uint32", "buf_id (chunk)", "base.DEC", None),
    ("rtrs.imm.offset", "uint32", "Offset of the trailer in the chunk", "base.DEC", None),
    ("rtrs.imm.msg_id", "uint32", "msg_id (= request buf_id)", "base.DEC", None),
    ("rtrs.imm.errno", "int32", "errno", "base.DEC", "errno"),
    ("rtrs.queue_depth", "uint16", "Session queue depth", "base.DEC", None),
    ("rtrs.queue_depth_source", "string", "Queue depth from", None, None),
    ("rtrs.mem_bits", "uint8", "Offset bits of an IO_REQ immediate", "base.DEC", None),
    ("rtrs.cid", "uint16", "Connection id (cid)", "base.DEC", None),
    ("rtrs.msg_len", "uint32", "Message length (reassembled)", "base.DEC", None),
    ("rtrs.fragment_of", "framenum", "Fragment of the message ending in", None, None),
    ("rtrs.retransmission_of", "framenum", "Retransmission of", None, None),
    ("rtrs.request_in", "framenum_request", "Request in", None, None),
    ("rtrs.response_in", "framenum_response", "Response in", None, None),
    ("rtrs.response_time", "double", "Response time (seconds)", None, None),
    ("rtrs.data_for", "framenum", "READ data / invalidation for the request in", None, None),
    ("rtrs.rkey", "uint32", "Invalidated rkey", "base.HEX", None),
    ("rtrs.partial", "boolean", "Request started before the capture (tail only)", None, None),
    ("rtrs.request_before_capture", "boolean", "Request sent before the capture started",
     None, None),
    ("rtrs.failover_of", "framenum", "Failed over: re-sends the request in", None, None),
    ("rtrs.response_not_delivered", "framenum",
     "Response not delivered (retransmitted): request re-sent in", None, None),
    ("rtrs.no_response", "framenum", "No response: request re-sent in", None, None),
    ("rtrs.failover_unseen", "string",
     "Failed over from the path (original not on the wire, the kernel's permit order)",
     None, None),
    ("rtrs.cm.rej_reason", "uint16", "CM reject reason", "base.DEC", "cm_rej_reasons"),
    ("rtrs.cm.sender", "string", "Sent by", None, None),
    ("rtrs.limit.table", "string", "State table at its limit", None, None),
    ("rtrs.limit.evicted", "uint32", "Entries evicted from it so far", "base.DEC", None),
)

class GenerateError(Exception):
    pass


@dataclass(frozen=True)
class LuaField:
    """One generated ProtoField (also the test/README manifest entry)."""
    key: str             # Lua table key in F
    abbrev: str          # display-filter name
    ftype: str           # uint8 … uint64, int16, int32, guid, string, bytes, bool, none, …
    label: str
    base: Optional[str] = None
    enum: Optional[str] = None
    mask: Optional[int] = None
    bits: Optional[int] = None   # bool: width of the parent field
    proto: str = "rtrs"
    msg: Optional[str] = None    # message name (layout fields)
    source: Optional[str] = None  # Scapy field name
    role: str = "value"          # value | bits | flag | op | presence | runtime


def lua_name(name):
    """Scapy field name → Lua/Wireshark name: kernel placeholders lose '__'."""
    return name.lstrip("_")


def _flag_names(table_name):
    table = dict(ENUM_TABLES[table_name])
    names = list(table.values())
    prefix = os.path.commonprefix(names)
    prefix = prefix[:prefix.rfind("_") + 1] if "_" in prefix else ""
    return [(bit, name[len(prefix):].lower()) for bit, name in sorted(table.items())]


def _ftype(spec, what):
    if spec.kind == "uint":
        if spec.size not in (1, 2, 3, 4, 8):
            raise GenerateError("%s: no ProtoField for a %d-byte integer" % (what, spec.size))
        return "uint%d" % (spec.size * 8)
    if spec.kind == "int":
        if spec.size not in (1, 2, 4, 8):
            raise GenerateError("%s: no ProtoField for a %d-byte integer" % (what, spec.size))
        return "int%d" % (spec.size * 8)
    if spec.kind == "uuid":
        return "guid"
    if spec.kind in ("string", "bytes"):
        return spec.kind
    if spec.kind == "ipv6":
        return "ipv6"
    raise GenerateError("%s: IR kind %r has no Lua mapping" % (what, spec.kind))


def _message_fields(proto, msg, layout):
    """LuaFields of one message, in wire order; raises on unknown IR kinds."""
    out = [LuaField(msg, "%s.%s" % (proto, msg), "none", getattr(layout.cls, "_name", layout.name), proto=proto,
                    msg=msg, role="presence")]
    seen = set()
    for spec in layout.fields:
        what = "%s.%s" % (layout.name, spec.name)
        name = lua_name(spec.name)
        if name in seen:
            raise GenerateError("%s: two fields map to %r" % (what, name))
        seen.add(name)
        key = "%s_%s" % (msg, name)
        abbrev = "%s.%s.%s" % (proto, msg, name)
        if spec.kind == "list":
            continue  # elements are their own message (sg_desc)
        if spec.kind == "trailer":
            raise GenerateError("%s: trailer fields are not RTRS message fields" % what)
        ftype = _ftype(spec, what)
        base = None
        if ftype.startswith(("uint", "int")):
            base = "base.HEX" if spec.display == "hex" else "base.DEC"
        if spec.is_bits:
            mask = ((1 << spec.width) - 1) << spec.shift
            out.append(LuaField(key, abbrev, ftype, spec.name, base, spec.enum, mask,
                                proto=proto, msg=msg, source=spec.name, role="bits"))
            continue
        # a field holding an operation in some bits: the value_string goes to the op subfield
        enum = None if spec.mask is not None else spec.enum
        out.append(LuaField(key, abbrev, ftype, spec.name, base, enum, None,
                            proto=proto, msg=msg, source=spec.name))
        if spec.mask is not None:
            op_mask = spec.mask
            out.append(LuaField(key + "_op", abbrev + ".op", ftype, "op", "base.DEC",
                                spec.enum, op_mask, proto=proto, msg=msg, source=spec.name,
                                role="op"))
        if spec.flags is not None:
            for bit, flag in _flag_names(spec.flags):
                out.append(LuaField("%s_%s" % (key, flag), "%s.%s" % (abbrev, flag), "bool",
                                    flag.upper(), None, None, bit, spec.size * 8, proto=proto,
                                    msg=msg, source=spec.name, role="flag"))
    return out


def _runtime_fields():
    out = []
    for abbrev, ftype, label, base, enum in RUNTIME_FIELDS:
        key = abbrev[len("rtrs."):].replace(".", "_")
        out.append(LuaField(key, abbrev, ftype, label, base, enum, role="runtime"))
    return out


def field_manifest():
    """Every generated ProtoField as LuaField, in declaration order."""
    fields = []
    for proto, msg, cls in MESSAGES:
        fields.extend(_message_fields(proto, msg, layout_of(cls)))
    fields.extend(_runtime_fields())
    abbrevs = [f.abbrev for f in fields]
    if len(set(abbrevs)) != len(abbrevs):
        raise GenerateError("duplicate field names")
    return fields


def _lua_str(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def _protofield(f):
    vs = "VS.%s" % f.enum if f.enum else "nil"
    if f.ftype == "none":
        return "ProtoField.none(%s, %s)" % (_lua_str(f.abbrev), _lua_str(f.label))
    if f.ftype == "bool":
        return "ProtoField.bool(%s, %s, %d, nil, 0x%x)" % (
            _lua_str(f.abbrev), _lua_str(f.label), f.bits, f.mask)
    if f.ftype == "boolean":  # a runtime flag, no bits of a parent field
        return "ProtoField.bool(%s, %s)" % (_lua_str(f.abbrev), _lua_str(f.label))
    if f.ftype.startswith(("uint", "int")):
        mask = ", 0x%x" % f.mask if f.mask is not None else ""
        return "ProtoField.%s(%s, %s, %s, %s%s)" % (
            f.ftype, _lua_str(f.abbrev), _lua_str(f.label), f.base, vs, mask)
    if f.ftype in ("guid", "string", "bytes", "ipv6", "double"):
        return "ProtoField.%s(%s, %s)" % (f.ftype, _lua_str(f.abbrev), _lua_str(f.label))
    if f.ftype == "framenum":
        return "ProtoField.framenum(%s, %s, base.NONE)" % (_lua_str(f.abbrev), _lua_str(f.label))
    if f.ftype in ("framenum_request", "framenum_response"):
        kind = f.ftype.split("_")[1].upper()
        return "ProtoField.framenum(%s, %s, base.NONE, frametype.%s)" % (
            _lua_str(f.abbrev), _lua_str(f.label), kind)
    raise GenerateError("%s: unknown ProtoField type %s" % (f.abbrev, f.ftype))
