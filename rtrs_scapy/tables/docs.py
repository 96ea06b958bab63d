"""docs/TABLES.md's column tables, generated from the schema (schema.py).

``python -m rtrs_scapy.tables.docs`` rewrites the block between the markers;
``--check`` exits 1 when it is stale (a test does the same).  The prose around
the block is written by hand.
"""

import sys
from pathlib import Path

from .schema import SCHEMA_VERSION, TABLES, describe, schema

BEGIN = "<!-- tables: generated from rtrs_scapy/tables/schema.py -->"
END = "<!-- /tables -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "TABLES.md"


def _type(kind):
    text = str(kind)
    return "timestamp[ns, UTC]" if text == "timestamp[ns, tz=UTC]" else text


def render():
    """The generated block, markers included."""
    out = [BEGIN, "", "Schema version **%s**." % SCHEMA_VERSION, ""]
    for table in TABLES:
        out += ["### %s" % table, "", describe(table), "",
                "| column | type | null | meaning |", "|---|---|---|---|"]
        for field in schema(table):
            meaning = field.metadata[b"description"].decode().replace("|", "\\|")
            out.append("| `%s` | %s | %s | %s |" % (field.name, _type(field.type),
                                                   "yes" if field.nullable else "no", meaning))
        out.append("")
    out.append(END)
    return "\n".join(out)


def refreshed(text):
    """``text`` with its generated block replaced by the current one."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + render() + text[end:]


def main(argv):
    text = DOC.read_text()
    fresh = refreshed(text)
    if "--check" in argv:
        print("%s: %s" % (DOC.name, "tables are fresh" if fresh == text else "stale"))
        return 0 if fresh == text else 1
    DOC.write_text(fresh)
    print("%s: tables rewritten" % DOC.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
