"""Man pages of ``rtrs-dissect`` and of each command, generated from the click
definitions by click-man: ``python -m rtrs_scapy.cli.man DIR`` writes
``DIR/rtrs-dissect.1``, ``DIR/rtrs-dissect-summary.1``, … (docs/cli.md).

click-man walks a group's ``commands`` dict; ``rtrs-dissect`` loads its commands
only when they run (``DefaultToSummary.get_command``), so a copy of the group
with every command resolved is handed to it.  The running CLI is left as it is.
"""

import copy
import os
import sys
from importlib.metadata import version

import click


def resolved(group, ctx=None):
    """A copy of ``group`` whose ``commands`` holds every command it lists, subgroups too."""
    ctx = ctx or click.Context(group, info_name="rtrs-dissect")
    full = copy.copy(group)
    full.commands = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            command = resolved(command, click.Context(command, info_name=name, parent=ctx))
        full.commands[name] = command
    return full


def write_man_pages(target_dir, date=None):
    """Write every page into ``target_dir`` (created); return their paths, sorted."""
    from click_man.core import write_man_pages as click_man_write

    from . import main
    os.makedirs(target_dir, exist_ok=True)
    click_man_write("rtrs-dissect", resolved(main), version=version("rtrs-scapy"),
                    target_dir=target_dir, date=date)
    return sorted(os.path.join(target_dir, name) for name in os.listdir(target_dir)
                  if name.startswith("rtrs-dissect") and name.endswith(".1"))


def _main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m rtrs_scapy.cli.man DIR", file=sys.stderr)
        return 2
    for path in write_man_pages(argv[0]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
