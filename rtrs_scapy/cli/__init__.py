"""``rtrs-dissect``: the command-line front end (click).

``rtrs-dissect FILE`` is ``rtrs-dissect summary FILE``.  Products go to stdout,
progress and messages to stderr.  Exit codes: 0 = read and summarised (even
when the capture shows errors or is truncated), 1 = nothing readable, 2 = usage.

Each command lives in its own module of this package (or beside its subsystem)
and is registered here.
"""

import click


class DefaultToSummary(click.Group):
    """A group where an unknown first word (a capture file) means ``summary``."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["summary"] + list(args)
        return super().resolve_command(ctx, args)


@click.group(cls=DefaultToSummary)
@click.version_option(package_name="rtrs-scapy")
def main():
    """Decode and summarise Linux RTRS/RNBD traffic in InfiniBand/RoCE captures."""


def _register():
    from ..craft.commands import craft
    from ..wireshark.commands import wireshark
    from .docs import docs
    from .messages import messages, show
    from .shell import shell
    from .summary import summary
    for command in (summary, messages, show, shell, craft, wireshark, docs):
        main.add_command(command)


_register()
