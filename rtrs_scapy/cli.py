"""``rtrs-dissect``: the command-line front end (click).

``rtrs-dissect FILE`` is ``rtrs-dissect summary FILE``.  Products go to stdout,
progress and messages to stderr.  Exit codes: 0 = read and summarised (even
when the capture shows errors or is truncated), 1 = nothing readable, 2 = usage.
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


@main.command()
def shell():
    """Scapy's interactive shell with every RTRS/RNBD layer loaded."""
    from scapy.main import interact
    interact(mydict=_layer_namespace())


def _layer_namespace():
    import scapy.all
    import rtrs_scapy
    names = {k: v for k, v in vars(scapy.all).items() if not k.startswith("_")}
    names.update({k: v for k, v in vars(rtrs_scapy).items() if not k.startswith("_")})
    return names


# Subcommands that live beside their subsystem register here.
