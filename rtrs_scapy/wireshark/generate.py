"""Layout IR → Wireshark Lua: the generated half of ``wireshark/rtrs.lua``.

Everything with an offset, a size, an endianness, an enum or a count comes
from ``layout.layout_of`` of the Scapy layers; the hand-written rule files of
``lua/`` (one per rule, each naming its docs/PROTOCOL.md heading; inlined in
``RULE_FILES`` order between BEGIN/END markers) only hold state and heuristics.
They use the generated locals (P_RTRS, P_RNBD, P_LIMITS, C, QD, LIMITS, OP, CM,
VS, F, EF, SIZE, LIST, READ, DISSECT, RTRS_SEND_BY_TYPE, RNBD_BY_TYPE, peek_*,
read_bth) and hold no message layout.  Output is deterministic: same layers → same bytes.
Section order: Protos → constants → value_strings → ProtoFields → ProtoExperts →
SIZE → read_/dissect_ per message → dispatch tables → read_bth → rule files →
registration.
(ProtoExperts come before the code that uses them: Lua locals must be
declared before the functions that capture them.)

Wireshark field names: ``rtrs.<msg>.<field>`` / ``rnbd.<msg>.<field>`` with
the kernel field name; a Scapy name starting with ``__`` (kernel placeholders
such as ``__cma_version``, ``__padding``) loses the underscores
(``rtrs.conn_req.cma_version``).  Flag bits of a flags field become boolean
sub-fields ``<field>.<flag>`` (the kernel name without the table's common
prefix, lower case); the RNBD ``rw`` field gets ``rnbd.io.rw.op`` (mask of the
operation bits) plus the flag booleans.
"""

import os

from .. import __version__
from ..spec import constants, imm
from ..analysis import qdepth
from ..layers import cm as cm_layers
from ..layers import ib as ib_layers
from ..layers import rnbd, rtrs
from ..layout.from_layers import ENUM_TABLES, fingerprint_of, layout_of
from .fields import (  # noqa: F401  (re-exported for the tests)
    MESSAGES, GenerateError, LuaField, _lua_str, _message_fields, _protofield,
    field_manifest, lua_name,
)
from ..spec.limits import kept_by

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "lua")
#: The rule files in the order they are inlined: a Lua local exists only after its
#: definition, so each file comes after the ones it uses.
RULE_FILES = (
    "ib_fields", "qdepth", "state", "failover", "pairing", "reset", "streams", "trailers",
    "classify", "reassembly", "first_pass", "render", "cm", "entry", "cut_frames",
)


def rule_path(name):
    """The path of a rule file (``RULE_FILES``)."""
    return os.path.join(RULES, name + ".lua")

#: Dispatch tables (type value → message): the layers' dispatcher classes.
DISPATCH = (
    ("RTRS_SEND_BY_TYPE", rtrs.RtrsMsg),
    ("RTRS_TRAILER_BY_TYPE", rtrs.RtrsMsgRdmaHdr),
    ("RNBD_BY_TYPE", rnbd.RnbdMsgHdr),
)


def dispatch_table(dispatcher):
    """type value → message class of a dispatcher layer (TypeDispatcher), or raise."""
    table = getattr(dispatcher, "type_table", None)
    if not table:
        raise GenerateError("%s: no dispatch table" % dispatcher.__name__)
    return dict(table)


#: Constants the runtime needs, by kernel name.
CONSTANT_NAMES = (
    "RTRS_MAGIC", "RTRS_PROTO_VER_MAJOR", "RTRS_MSG_INFO_REQ", "RTRS_MSG_INFO_RSP",
    "RTRS_MSG_WRITE", "RTRS_MSG_READ", "RTRS_MSG_RKEY_RSP", "RTRS_MSG_NEED_INVAL_F",
    "RTRS_MSG_NEW_RKEY_F", "RTRS_IO_REQ_IMM", "RTRS_IO_RSP_IMM", "RTRS_IO_RSP_W_INV_IMM",
    "RTRS_HB_MSG_IMM", "RTRS_HB_ACK_IMM", "RNBD_MSG_SESS_INFO", "RNBD_MSG_SESS_INFO_RSP",
    "RNBD_MSG_OPEN", "RNBD_MSG_OPEN_RSP", "RNBD_MSG_IO", "RNBD_MSG_CLOSE", "RNBD_OP_MASK",
    "RNBD_OP_FLUSH",
    "MAX_SESS_QUEUE_DEPTH", "DEFAULT_MAX_HDR_SIZE",
)
IMM_CONSTANTS = ("IMM_TYPE_SHIFT", "IMM_PAYLOAD_MASK", "MSG_ID_BITS", "MSG_ID_MASK", "ERRNO_MASK")

#: The queue depth rule's constants (rtrs_scapy/analysis/qdepth.py): the Lua rule
#: reads only these, so it runs under plain Lua with this table alone.
QDEPTH_CONSTANTS = (
    ("MIN_MEM_BITS", qdepth.MIN_MEM_BITS), ("MAX_MEM_BITS", qdepth.MAX_MEM_BITS),
    ("DEFAULT_MEM_BITS", qdepth.DEFAULT_MEM_BITS), ("PRUNE_MARGIN", qdepth.PRUNE_MARGIN),
    ("DECIDE_AFTER", qdepth.DECIDE_AFTER), ("IMM_TYPE_SHIFT", imm.IMM_TYPE_SHIFT),
    ("MAX_SESS_QUEUE_DEPTH", constants.MAX_SESS_QUEUE_DEPTH),
)


def errno_table():
    """-errno -> name for every errno of the 9-bit IO_RSP field that Linux names."""
    table = {}
    for err in range(1, imm.ERRNO_MASK + 1):
        name = constants.errno_name(err)
        if name != "E%d" % err:
            table[-err] = name
    return table


#: value_string tables that are not layout enums: name -> items
EXTRA_TABLES = {"errno": errno_table}

#: RC opcodes the runtime dispatches on (names from the IB layer's opcode table).
OPCODE_NAMES = (
    "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_LAST_WITH_IMMEDIATE",
    "RC_SEND_ONLY", "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_FIRST",
    "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST", "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    "RC_SEND_LAST_WITH_INVALIDATE", "RC_SEND_ONLY_WITH_INVALIDATE",
)

#: ProtoExpert items: key, abbrev, text, group, severity.
EXPERTS = (
    ("short", "rtrs.expert.short", "Message shorter than its layout", "MALFORMED", "ERROR"),
    ("errno", "rtrs.expert.errno", "Request failed (nonzero errno)", "RESPONSE_CODE", "WARN"),
    ("cm_reject", "rtrs.expert.cm_reject", "RTRS connection rejected", "RESPONSE_CODE", "WARN"),
    ("bad_magic", "rtrs.expert.bad_magic", "Bad RTRS magic or protocol version", "PROTOCOL", "WARN"),
    ("unknown_imm", "rtrs.expert.unknown_imm", "Unknown immediate type", "PROTOCOL", "WARN"),
    ("psn_gap", "rtrs.expert.psn_gap", "PSN gap or retransmission", "SEQUENCE", "WARN"),
    ("no_trailer", "rtrs.expert.no_trailer", "IO request without a valid RTRS trailer",
     "MALFORMED", "WARN"),
    ("inferred", "rtrs.expert.inferred", "Queue depth inferred (no CM handshake in the capture)",
     "PROTOCOL", "NOTE"),
    ("assumed", "rtrs.expert.assumed",
     "Queue depth assumed: the capture cannot tell, kernel default", "PROTOCOL", "NOTE"),
    ("offset_conflict", "rtrs.expert.offset_conflict",
     "IO_REQ offset fits no queue depth still possible", "PROTOCOL", "WARN"),
    ("partial", "rtrs.expert.partial",
     "Request started before the capture: only its tail is visible", "SEQUENCE", "NOTE"),
    ("before_capture", "rtrs.expert.before_capture",
     "Response to a request sent before the capture started", "SEQUENCE", "CHAT"),
    ("limit", "rtrs.expert.limit", "State limit reached: the oldest idle entries were evicted",
     "PROTOCOL", "NOTE"),
    ("cut", "rtrs.expert.cut", "Payload cut by the capture (snaplen): decoded from its headers",
     "UNDECODED", "NOTE"),
    ("failover", "rtrs.expert.failover", "Request failed over from another path",
     "SEQUENCE", "NOTE"),
    ("response_not_delivered", "rtrs.expert.response_not_delivered",
     "Response not delivered: the request was re-sent on another path", "SEQUENCE", "WARN"),
    ("no_response", "rtrs.expert.no_response",
     "No response: the request was re-sent on another path", "SEQUENCE", "WARN"),
    ("failover_unseen", "rtrs.expert.failover_unseen",
     "Request failed over from another path, its original not on the wire (permit order)",
     "SEQUENCE", "NOTE"),
)


# -- code emitters --------------------------------------------------------------

def _read_expr(spec, r="r"):
    """Lua expression reading a scalar field's value from range r (None: not read)."""
    if spec.kind == "uint":
        if spec.size == 8:
            return "%s:le_uint64()" % r if spec.endian == "<" else "%s:uint64()" % r
        return "%s:le_uint()" % r if spec.endian == "<" and spec.size > 1 else "%s:uint()" % r
    if spec.kind == "int":
        if spec.size == 8:
            return "%s:le_int64()" % r if spec.endian == "<" else "%s:int64()" % r
        return "%s:le_int()" % r if spec.endian == "<" and spec.size > 1 else "%s:int()" % r
    if spec.kind == "uuid":
        return "tostring(%s:bytes())" % r
    if spec.kind == "string":
        return "%s:stringz()" % r
    if spec.kind in ("bytes", "ipv6"):
        return None
    raise GenerateError("%s: IR kind %r cannot be read" % (spec.name, spec.kind))


def _add_call(spec):
    return "add_le" if spec.endian == "<" and spec.size > 1 else "add"


def _emit_read(msg, layout, lines):
    lines.append("-- read_%s: values of %s at off, no tree; nil when too short" % (msg, layout.name))
    lines.append("local function read_%s(tvb, off)" % msg)
    lines.append("  if tvb:len() - off < SIZE.%s then return nil end" % msg)
    lines.append("  local v = {}")
    for spec in layout.fields:
        name = lua_name(spec.name)
        if spec.kind == "list":
            elem = _element_msg(spec)
            lines.append("  do  -- %s[%s]: bounded by the bytes present" % (name, spec.count_ref))
            lines.append("    local n = math.min(v.%s, math.floor((tvb:len() - off - SIZE.%s) / SIZE.%s))"
                         % (lua_name(spec.count_ref), msg, elem))
            lines.append("    local list = {}")
            lines.append("    for i = 1, n do list[i] = read_%s(tvb, off + SIZE.%s + (i - 1) * SIZE.%s) end"
                         % (elem, msg, elem))
            lines.append("    v.%s = list" % name)
            lines.append("  end")
            continue
        if spec.is_bits:
            lines.append("  v.%s = bit.band(bit.rshift(tvb(off + %d, %d):uint(), %d), 0x%x)"
                         % (name, spec.offset, spec.size, spec.shift, (1 << spec.width) - 1))
            continue
        expr = _read_expr(spec, "tvb(off + %d, %d)" % (spec.offset, spec.size))
        if expr is not None:
            lines.append("  v.%s = %s" % (name, expr))
    lines.append("  return v")
    lines.append("end")
    lines.append("")


def _element_msg(spec):
    for _proto, msg, cls in MESSAGES:
        if layout_of(cls) == spec.element:
            return msg
    raise GenerateError("list %s: element layout %s is not a generated message"
                        % (spec.name, spec.element.name))


def _emit_dissect(proto, msg, layout, fields, lines):
    by_source = {}
    for f in fields:
        by_source.setdefault(f.source, []).append(f)
    lines.append("-- dissect_%s: %s (%s), %s bytes%s" % (
        msg, layout.name, layout.cls.__doc__.strip().splitlines()[0].split(":")[0],
        layout.fixed_size,
        " + list" if layout.lists else ""))
    lines.append("-- returns the values table (nil when too short), the subtree and the end offset")
    lines.append("local function dissect_%s(tvb, pinfo, tree, off)" % msg)
    lines.append("  local avail = tvb:len() - off")
    lines.append("  if avail < SIZE.%s then" % msg)
    lines.append("    local t = avail > 0 and tree:add(F.%s, tvb(off, avail)) or tree:add(F.%s)"
                 % (msg, msg))
    lines.append('    t:add_proto_expert_info(EF.short, string.format("%s: %%d of %%d bytes", avail, SIZE.%s))'
                 % (msg, msg))
    lines.append("    return nil, t, off + avail")
    lines.append("  end")
    lines.append("  local t = tree:add(F.%s, tvb(off, SIZE.%s))" % (msg, msg))
    lines.append("  local v, r = {}, nil")
    for spec in layout.fields:
        name = lua_name(spec.name)
        if spec.kind == "list":
            elem = _element_msg(spec)
            lines.append("  do  -- %s[%s]: counted list, bounded by the bytes present"
                         % (name, spec.count_ref))
            lines.append("    local n = v.%s" % lua_name(spec.count_ref))
            lines.append("    local fit = math.floor((avail - SIZE.%s) / SIZE.%s)" % (msg, elem))
            lines.append("    if n > fit then")
            lines.append('      t:add_proto_expert_info(EF.short, string.format("%s: %%d of %%d elements present", fit, n))'
                         % name)
            lines.append("      n = fit")
            lines.append("    end")
            lines.append("    local list, o = {}, off + SIZE.%s" % msg)
            lines.append("    for i = 1, n do")
            lines.append("      list[i] = dissect_%s(tvb, pinfo, t, o)" % elem)
            lines.append("      o = o + SIZE.%s" % elem)
            lines.append("    end")
            lines.append("    v.%s = list" % name)
            lines.append("    t:set_len(o - off)")
            lines.append("    return v, t, o")
            lines.append("  end")
            continue
        rng = "tvb(off + %d, %d)" % (spec.offset, spec.size)
        flist = by_source.get(spec.name, [])
        main = [f for f in flist if f.role in ("value", "bits")]
        subs = [f for f in flist if f.role in ("op", "flag")]
        if not main:
            raise GenerateError("%s.%s: no ProtoField" % (layout.name, spec.name))
        f = main[0]
        lines.append("  r = %s" % rng)
        if spec.is_bits:
            lines.append("  v.%s = bit.band(bit.rshift(r:uint(), %d), 0x%x)"
                         % (name, spec.shift, (1 << spec.width) - 1))
            lines.append("  t:add(F.%s, r)" % f.key)
            continue
        expr = _read_expr(spec)
        if expr is not None:
            lines.append("  v.%s = %s" % (name, expr))
        if spec.kind == "string":
            lines.append("  local it_%s = t:add(F.%s, r, v.%s)" % (name, f.key, name)
                         if subs else "  t:add(F.%s, r, v.%s)" % (f.key, name))
        elif subs:
            lines.append("  local it_%s = t:%s(F.%s, r)" % (name, _add_call(spec), f.key))
        else:
            lines.append("  t:%s(F.%s, r)" % (_add_call(spec), f.key))
        for sub in subs:
            lines.append("  it_%s:%s(F.%s, r)" % (name, _add_call(spec), sub.key))
    lines.append("  return v, t, off + SIZE.%s" % msg)
    lines.append("end")
    lines.append("")


#: The BTH fields the rules read, in the order read_bth returns them.
BTH_FIELDS = ("opcode", "padcount", "dqpn", "psn")


def _emit_read_bth(lines):
    """read_bth(raw): the BTH_FIELDS of a BTH's bytes (a Lua string), by the IB layer's
    offsets: one string from the tvb instead of a FieldInfo per field."""
    layout = layout_of(ib_layers.BTH)
    size = layout.fixed_size
    names = ", ".join("b%d" % i for i in range(size))
    lines.append("-- read_bth: %s of the %d bytes of a BTH (rtrs_scapy.layers.ib);"
                 " nil when shorter" % (", ".join(BTH_FIELDS), size))
    lines.append("local function read_bth(raw)")
    lines.append("  if #raw < %d then return nil end" % size)
    lines.append("  local %s = string.byte(raw, 1, %d)" % (names, size))
    values = []
    for name in BTH_FIELDS:
        spec = layout.field(name)
        if spec.endian != ">" or spec.offset + spec.size > size:
            raise GenerateError("BTH.%s: not a big-endian field of the header" % name)
        expr = " + ".join("b%d * %d" % (spec.offset + i, 1 << (8 * (spec.size - 1 - i)))
                          if i < spec.size - 1 else "b%d" % (spec.offset + i)
                          for i in range(spec.size))
        if spec.is_bits and spec.shift:
            expr = "bit.rshift(%s, %d)" % (expr, spec.shift)
        if spec.is_bits and spec.width < 8 * spec.size:
            expr = "bit.band(%s, 0x%x)" % (expr, (1 << spec.width) - 1)
        values.append(expr)
    lines.append("  return %s" % ",\n         ".join(values))
    lines.append("end")
    lines.append("")


def _lua_table(name, items, fmt_key="%s", fmt_value="%s"):
    body = ", ".join("[%s] = %s" % (fmt_key % k, fmt_value % v) for k, v in items)
    return "local %s = { %s }" % (name, body)


def generate():
    """The complete Lua dissector as text."""
    layouts = [(proto, msg, layout_of(cls)) for proto, msg, cls in MESSAGES]
    fingerprint = fingerprint_of([cls for _p, _m, cls in MESSAGES])
    fields = field_manifest()
    used_enums = sorted({f.enum for f in fields if f.enum})
    lines = [
        "-- rtrs.lua: Wireshark dissector for Linux RTRS/RNBD over InfiniBand / RoCE.",
        "-- GENERATED by rtrs_scapy.wireshark.generate from rtrs_scapy %s, layout %s -- do not edit."
        % (__version__, fingerprint),
        "-- Change the Scapy layers (or a rule file of rtrs_scapy/wireshark/lua/) and run",
        "--   rtrs-dissect wireshark export -o wireshark/rtrs.lua",
        "-- Lua 5.2 (Wireshark 4.0): bit.* for bit operations, UInt64 for 64-bit values.",
        "",
        "-- == Protos ==",
        'local P_RTRS = Proto("rtrs", "RTRS (RDMA Transport, Linux rtrs)")',
        'local P_RNBD = Proto("rnbd", "RNBD (RDMA Network Block Device)")',
        "-- a post-dissector: state evictions shown on the frame that caused them",
        'local P_LIMITS = Proto("rtrs_limits", "RTRS state limits")',
        'local VERSION = "%s"' % __version__,
        'local LAYOUT = "%s"' % fingerprint,
        "",
        "-- == constants (rtrs_scapy.spec.constants, rtrs_scapy.spec.imm) ==",
        "local C = {",
    ]
    for module, names in ((constants, CONSTANT_NAMES), (imm, IMM_CONSTANTS)):
        for name in names:
            value = getattr(module, name)
            fmt = "  %s = 0x%X," if name.endswith(("MAGIC", "MASK")) else "  %s = %d,"
            lines.append(fmt % (name, value))
    lines.append("}")
    psn = layout_of(ib_layers.BTH).field("psn")
    lines.append("-- PSNs count modulo 2^%d (the BTH psn field of rtrs_scapy.layers.ib)" % psn.width)
    lines.append("C.PSN_MOD = %d" % (1 << psn.width))
    lines.append("C.IMMDT_SIZE = %d  -- bytes of the ImmDt header" % layout_of(ib_layers.ImmDt).fixed_size)
    lines.append("C.ICRC_SIZE = %d  -- bytes of the ICRC behind the payload"
                 % layout_of(ib_layers.BTH).trailer_size)
    lines.append("-- the queue depth rule (rtrs_scapy.analysis.qdepth)")
    lines.append("local QD = {")
    for name, value in QDEPTH_CONSTANTS:
        lines.append("  %s = %d," % (name, value))
    lines.append("}")
    lines.append("-- bounds of the state tables (rtrs_scapy.spec.limits)")
    lines.append("local LIMITS = {")
    for name, entries, what in kept_by("plugin"):
        lines.append("  %s = %d,  -- %s" % (name, entries, what))
    lines.append("}")
    lines.append("-- IB opcodes (rtrs_scapy.layers.ib)")
    lines.append("local OP = {")
    for name in OPCODE_NAMES:
        lines.append("  %s = 0x%02x," % (name[3:], ib_layers.opcode_value(name)))
    lines.append("}")
    lines.append("-- RDMA CM service ids of the RTRS/RNBD default port (IP and AF_IB port spaces)")
    lines.append("local RTRS_SERVICE_IDS = {")
    for space in (cm_layers.RDMA_PS_TCP, cm_layers.RDMA_PS_IB):
        sid = cm_layers.service_id(constants.RTRS_PORT, space)
        lines.append("  [\"%d\"] = true," % sid)
    lines.append("}")
    lines.append("-- CM attribute ids (rtrs_scapy.layers.cm)")
    lines.append("local CM = {")
    for attr, cls in sorted(cm_layers.CM_MESSAGES.items()):
        lines.append("  %s = 0x%04x," % (cls.__name__[2:].upper(), attr))
    lines.append("}")
    lines.append("")
    lines.append("-- == value_string tables (one per kernel enum) ==")
    lines.append("local VS = {}")
    for enum in used_enums:
        table = EXTRA_TABLES[enum]() if enum in EXTRA_TABLES else ENUM_TABLES[enum]
        items = sorted(dict(table).items())
        lines.append(_lua_table("vs", items, "%d", '"%s"').replace("local vs", "VS.%s" % enum))
    lines.append("")
    lines.append("-- == ProtoFields (wire order per message) ==")
    lines.append("local F = {}")
    for f in fields:
        lines.append("F.%s = %s" % (f.key, _protofield(f)))
    for proto, var in (("rtrs", "P_RTRS"), ("rnbd", "P_RNBD")):
        members = [f.key for f in fields if f.proto == proto]
        lines.append("%s.fields = {" % var)
        for i in range(0, len(members), 6):
            lines.append("  " + ", ".join("F.%s" % k for k in members[i:i + 6]) + ",")
        lines.append("}")
    lines.append("")
    lines.append("-- == ProtoExperts ==")
    lines.append("local EF = {}")
    for key, abbrev, text, group, severity in EXPERTS:
        lines.append("EF.%s = ProtoExpert.new(%s, %s, expert.group.%s, expert.severity.%s)"
                     % (key, _lua_str(abbrev), _lua_str(text), group, severity))
    lines.append("P_RTRS.experts = { %s }" % ", ".join("EF.%s" % e[0] for e in EXPERTS))
    lines.append("")
    lines.append("-- == SIZE: fixed bytes of each message (before a counted list) ==")
    lines.append("local SIZE = {")
    for _proto, msg, layout in layouts:
        lines.append("  %s = %d," % (msg, layout.fixed_size))
    lines.append("}")
    lines.append("-- counted lists: message -> {count field, element message}")
    lines.append("local LIST = {")
    for _proto, msg, layout in layouts:
        for spec in layout.lists:
            lines.append('  %s = { count = "%s", element = "%s" },'
                         % (msg, lua_name(spec.count_ref), _element_msg(spec)))
    lines.append("}")
    lines.append("")
    # list elements first: a local function must exist before its callers
    elements = {_element_msg(spec) for _p, _m, layout in layouts for spec in layout.lists}
    ordered = ([item for item in layouts if item[1] in elements]
               + [item for item in layouts if item[1] not in elements])
    lines.append("-- == read_<msg>: values without a tree ==")
    for _proto, msg, layout in ordered:
        _emit_read(msg, layout, lines)
    lines.append("-- == dissect_<msg>: tree items ==")
    by_msg = {}
    for f in fields:
        if f.msg:
            by_msg.setdefault(f.msg, []).append(f)
    for proto, msg, layout in ordered:
        _emit_dissect(proto, msg, layout, by_msg[msg], lines)
    lines.append("local READ = {")
    for _proto, msg, _layout in layouts:
        lines.append("  %s = read_%s," % (msg, msg))
    lines.append("}")
    lines.append("local DISSECT = {")
    for _proto, msg, _layout in layouts:
        lines.append("  %s = dissect_%s," % (msg, msg))
    lines.append("}")
    lines.append("local PROTO_OF = {")
    for proto, msg, _layout in layouts:
        lines.append('  %s = "%s",' % (msg, proto))
    lines.append("}")
    lines.append("")
    lines.append("-- == dispatch: type value -> message ==")
    names = {cls: msg for _p, msg, cls in MESSAGES}
    for table, dispatcher in DISPATCH:
        mapping = dispatch_table(dispatcher)
        items = []
        for value, cls in sorted(mapping.items()):
            if cls not in names:
                raise GenerateError("%s: %s is not a generated message" % (table, cls.__name__))
            items.append((value, names[cls]))
        lines.append(_lua_table(table, items, "%d", '"%s"'))
    # the leading type field shared by a dispatch family (same offset/size/endian in all)
    for fn, family in (("peek_rtrs_type", dispatch_table(rtrs.RtrsMsg)),
                       ("peek_rnbd_type", dispatch_table(rnbd.RnbdMsgHdr))):
        specs = {(s.offset, s.size, s.endian) for s in
                 (layout_of(c).field("type") for c in family.values())}
        if len(specs) != 1:
            raise GenerateError("%s: type field differs between messages" % fn)
        offset, size, endian = specs.pop()
        spec = layout_of(next(iter(family.values()))).field("type")
        lines.append("local function %s(tvb, off)" % fn)
        lines.append("  if tvb:len() - off < %d then return nil end" % (offset + size))
        lines.append("  return %s" % _read_expr(spec, "tvb(off + %d, %d)" % (offset, size)))
        lines.append("end")
    lines.append("")
    _emit_read_bth(lines)
    for name in RULE_FILES:
        with open(rule_path(name), encoding="utf-8") as fh:
            rule = fh.read()
        lines.append("-- BEGIN lua/%s.lua " % name + "-" * (72 - len(name)))
        lines.extend(rule.rstrip("\n").split("\n"))
        lines.append("-- END lua/%s.lua " % name + "-" * (74 - len(name)))
        lines.append("")
    lines.append("")
    lines.append("-- == registration ==")
    lines.append('P_RTRS:register_heuristic("infiniband.mad.cm.private", heur_cm_private)')
    lines.append('P_RTRS:register_heuristic("infiniband.payload", heur_payload)')
    lines.append("P_RTRS.dissector = decode_as_dissector")
    lines.append("P_RTRS.init = reset_state")
    lines.append("P_LIMITS.dissector = limits_postdissector")
    lines.append("register_postdissector(P_LIMITS)")
    lines.append('DissectorTable.get("infiniband"):add_for_decode_as(P_RTRS)')
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    import sys
    out = generate()
    path = (argv or sys.argv[1:] or [None])[0]
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
