"""The layout tables of docs/PROTOCOL.md, generated from the Scapy field lists.

The protocol reference is prose written by hand around tables that nobody
types: every offset, size, type, enum value and flag bit in them comes from
``layout.layout_of`` of the Scapy layers, the same IR that the fast path and the
Wireshark plugin are built from.  The document marks where each table goes:

    <!-- layout: RtrsMsgConnReq -->
    (generated: rewritten by ``rtrs-dissect docs``)
    <!-- /layout -->

    <!-- enum: ib_opcodes -->
    (generated)
    <!-- /enum -->

``update(text)`` fills every block; ``rtrs-dissect docs --check`` and
tests/test_protocol_doc.py fail when a block is stale or a documented layer has
none.
"""

import re
from pathlib import Path

from .from_layers import DECODED, ENUM_TABLES, layout_of

#: The default document: docs/PROTOCOL.md of the source tree.
PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"

CLASSES = {cls.__name__: cls for cls in DECODED}

#: Enum tables longer than this get a table of their own (an ``enum`` block).
INLINE_ENUM_MAX = 12
#: Tables whose values are written in hex by convention (opcodes, attribute ids).
HEX_ENUMS = {"ib_opcodes", "cm_attribute_ids", "mgmt_classes"}

_BLOCK = re.compile(r"(<!-- (layout|enum): (\S+) -->\n)(.*?)(<!-- /\2 -->)", re.S)


class DocError(Exception):
    pass


# -- one table ------------------------------------------------------------------

def _enum_value(table_name, value):
    return "0x%02x" % value if table_name in HEX_ENUMS else str(value)


def _enum_text(table_name):
    table = dict(ENUM_TABLES[table_name])
    if len(table) > INLINE_ENUM_MAX:
        return "enum `%s` (own table)" % table_name
    return ", ".join("%s `%s`" % (_enum_value(table_name, value), name)
                     for value, name in sorted(table.items()))


def _flags_text(table_name):
    table = dict(ENUM_TABLES[table_name])
    return "flags: " + ", ".join("0x%x `%s`" % (bit, name) for bit, name in sorted(table.items()))


def _bits(spec):
    high = spec.shift + spec.width - 1
    return "bit %d" % high if spec.width == 1 else "bits %d..%d" % (high, spec.shift)


def _unit(size, endian):
    name = "u%d" % (size * 8)
    if size == 1:
        return name
    return "%s %s" % (name, "LE" if endian == "<" else "BE")


def _type(spec):
    if spec.kind == "list":
        return "`%s` × `%s`" % (spec.element.name, spec.count_ref)
    if spec.kind == "trailer":
        return "%s, after the payload" % _unit(spec.size, spec.endian)
    if spec.is_bits:
        if spec.shift == 0 and spec.width == spec.size * 8:
            return _unit(spec.size, spec.endian)
        return "%s of %s" % (_bits(spec), _unit(spec.size, spec.endian))
    if spec.kind == "int":
        return "s%d %s" % (spec.size * 8, "LE" if spec.endian == "<" else "BE")
    if spec.kind == "uint":
        return _unit(spec.size, spec.endian)
    return {"uuid": "UUID, byte order", "ipv6": "IPv6 address / GID",
            "string": "NUL-padded string", "bytes": "bytes"}[spec.kind]


def _size(spec):
    if spec.kind == "list":
        return "%d × `%s`" % (spec.size, spec.count_ref)
    if spec.is_bits and not (spec.shift == 0 and spec.width == spec.size * 8):
        return "%d bit%s" % (spec.width, "" if spec.width == 1 else "s")
    return str(spec.size)


def _offset(spec):
    return "end − %d" % spec.size if spec.kind == "trailer" else str(spec.offset)


def _values(spec):
    parts = []
    if spec.mask is not None:
        parts.append("bits %d..0: %s" % (spec.mask.bit_length() - 1, _enum_text(spec.enum)))
    elif spec.enum:
        parts.append(_enum_text(spec.enum))
    if spec.flags:
        parts.append(_flags_text(spec.flags))
    return "; ".join(parts)


def _default(spec, fld):
    """What the layer builds when the field is not given (the kernel's usual value)."""
    value = fld.default
    if spec.kind == "list":
        return "empty"
    if value is None:
        return "computed"
    if isinstance(value, bytes):
        if not value:
            return "empty"
        return "zeros" if not value.strip(b"\0") else "`%s`" % value.hex()
    if spec.kind == "uuid":
        return "nil" if not int(value) else "`%s`" % value
    if isinstance(value, str):
        return "`%s`" % value if value else "empty"
    value = int(value)
    if spec.enum and spec.mask is None:
        return _enum_value(spec.enum, value)
    if spec.display == "hex" or spec.flags or spec.mask is not None:
        return "0x%x" % value
    return str(value)


def layout_table(cls):
    """The Markdown table of one layer, with a line saying its size."""
    layout = layout_of(cls)
    fields = {fld.name: fld for fld in cls.fields_desc}
    lines = ["| Offset | Size | Field | Type | Default | Values |",
             "|---|---|---|---|---|---|"]
    for spec in layout.fields:
        lines.append("| %s | %s | `%s` | %s | %s | %s |" % (
            _offset(spec), _size(spec), spec.name, _type(spec),
            _default(spec, fields[spec.name]), _values(spec)))
    size = "%d bytes" % layout.fixed_size
    if layout.element_size:
        size += " + %d × `%s`" % (layout.element_size, layout.lists[0].count_ref)
    if layout.trailer_size:
        size += ", then %d trailer bytes after the payload" % layout.trailer_size
    lines.append("")
    lines.append("`%s`: %s (layout fingerprint `%s`)." % (layout.name, size, layout.fingerprint))
    return "\n".join(lines) + "\n"


def enum_table(table_name):
    table = dict(ENUM_TABLES[table_name])
    lines = ["| Value | `%s` |" % table_name, "|---|---|"]
    for value, name in sorted(table.items()):
        lines.append("| %s | `%s` |" % (_enum_value(table_name, value), name))
    return "\n".join(lines) + "\n"


def _generate(kind, name):
    if kind == "layout":
        if name not in CLASSES:
            raise DocError("layout block for %r: not a documented layer (%s)"
                           % (name, ", ".join(CLASSES)))
        return layout_table(CLASSES[name])
    if name not in ENUM_TABLES:
        raise DocError("enum block for %r: not in layout.ENUM_TABLES" % name)
    return enum_table(name)


# -- the document ----------------------------------------------------------------

def update(text):
    """``text`` with every layout and enum block regenerated."""
    return _BLOCK.sub(lambda m: "%s\n%s\n%s" % (m.group(1), _generate(m.group(2), m.group(3)),
                                                m.group(5)), text)


def blocks(text):
    """(kind, name) of every block in ``text``."""
    return [(m.group(2), m.group(3)) for m in _BLOCK.finditer(text)]


def missing(text):
    """Documented layers without a layout block, and enums that a table sends to
    their own table without an enum block."""
    present = set(blocks(text))
    absent = ["layout: %s" % cls.__name__ for cls in DECODED
              if ("layout", cls.__name__) not in present]
    for cls in DECODED:
        for spec in layout_of(cls).fields:
            for table in (spec.enum, spec.flags):
                if (table and len(ENUM_TABLES[table]) > INLINE_ENUM_MAX
                        and ("enum", table) not in present
                        and "enum: %s" % table not in absent):
                    absent.append("enum: %s" % table)
    return absent


def problems(path=PROTOCOL_MD):
    """What is wrong with the document's generated parts (empty when it is fresh)."""
    text = Path(path).read_text(encoding="utf-8")
    found = ["missing block <!-- %s -->" % what for what in missing(text)]
    if update(text) != text:
        found.append("stale tables: run `rtrs-dissect docs`")
    return found


def write(path=PROTOCOL_MD):
    """Regenerate the blocks in place; True when the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = update(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text
