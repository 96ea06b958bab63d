"""Before anything is imported: is every distribution the package and its test
extra ask for (setup.cfg) installed?  A clone tested without ``scripts/test.sh``
gets one line that names what is missing, not an import error per test file."""

import configparser
import re
from importlib import metadata
from pathlib import Path

SETUP_CFG = Path(__file__).resolve().parents[1] / "setup.cfg"
NAME = re.compile(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?")


def requirements(extras=("test",)):
    """The distribution names of install_requires and ``extras``, following our own
    extras (``rtrs-scapy[scale]``) and naming a distribution's extras too
    (``dask[distributed]``: dask and distributed)."""
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    own, table = cfg["metadata"]["name"], cfg["options.extras_require"]
    queue = cfg["options"]["install_requires"].splitlines()
    queue.append("%s[%s]" % (own, ",".join(extras)))
    followed, names = set(), set()
    while queue:
        match = NAME.match(queue.pop())
        if match is None:
            continue
        inner = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        if match.group(1) == own:
            for extra in inner - followed:
                followed.add(extra)
                queue += table[extra].splitlines()
        else:
            names.add(match.group(1))
            names.update(inner)
    return sorted(names)


def missing(extras=("test",)):
    """The required distributions that are not installed."""
    absent = []
    for name in requirements(extras):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


if __name__ == "__main__":
    # python tests/installed.py [test|scale,...]: exit 1 when something is missing
    # (scripts/setup-venv.sh asks before it runs pip)
    import sys
    wanted = tuple(e for e in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if e)
    sys.exit(1 if missing(wanted) else 0)
