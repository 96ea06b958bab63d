"""What the scripts that write a generated file share: write it, or with
``--check`` say whether the checked-in copy is stale (exit status 1)."""

import sys
from pathlib import Path


def write_or_check(out, text, check):
    """Write ``text`` to ``out`` (returns 0), or with ``check`` compare (1: stale)."""
    script = "scripts/" + Path(sys.argv[0]).name
    if check:
        if out.read_text() != text:
            print("%s is stale: run %s" % (out, script), file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print("wrote %s (%d bytes)" % (out, len(text)), file=sys.stderr)
    return 0
