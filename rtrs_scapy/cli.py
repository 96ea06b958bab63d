"""``rtrs-dissect``: the command-line front end (click).

``rtrs-dissect FILE`` is ``rtrs-dissect summary FILE``.  Products go to stdout,
progress and messages to stderr.  Exit codes: 0 = read and summarised (even
when the capture shows errors or is truncated), 1 = nothing readable, 2 = usage.
"""

import json
import sys

import click


class DefaultToSummary(click.Group):
    """A group where an unknown first word (a capture file) means ``summary``."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["summary"] + list(args)
        return super().resolve_command(ctx, args)


EXIT_UNREADABLE = 1  # documented: nothing readable (missing, empty, not a capture, …)

capture_argument = click.argument("capture", type=click.Path(dir_okay=False))
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                             default="text", show_default=True, help="Output format.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
queue_depth_option = click.option(
    "--queue-depth", type=click.IntRange(1, 65535), default=None,
    help="Queue depth for paths whose handshake is not in the capture (else inferred).")


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




def _analyze(capture, quiet, keep_messages, queue_depth=None):
    """Run the analyzer with a progress bar on a terminal; one-line errors, exit 1."""
    from .analysis import CaptureError, analyze
    from .fastpath.reader import SUPPORTED_LINK_TYPES, link_name, open_capture
    try:
        with open_capture(capture) as probe:
            total = probe.bytes_total
    except CaptureError as exc:
        raise click.ClickException(str(exc)) from None
    show_bar = not quiet and sys.stderr.isatty() and total
    try:
        if not show_bar:
            result = analyze(capture, keep_messages=keep_messages, queue_depth=queue_depth)
        else:
            with click.progressbar(length=total, file=sys.stderr, label="reading") as bar:
                done = [0]

                def progress(position):
                    bar.update(position - done[0])
                    done[0] = position
                result = analyze(capture, keep_messages=keep_messages,
                                 queue_depth=queue_depth, progress=progress)
    except CaptureError as exc:
        raise click.ClickException(str(exc)) from None
    unsupported = result.link_types - SUPPORTED_LINK_TYPES
    if unsupported and not result.analyzer.ib_frames:
        raise click.ClickException("%s: link type %s is not supported (Ethernet, Linux cooked, "
                                   "raw IP, InfiniBand, ERF)" % (
                                       capture, ", ".join(link_name(t) for t in unsupported)))
    if result.truncated:
        for frame, kind, detail in result.problems:
            click.echo("warning: %s: capture %s at frame %d: %s; summary of what was read"
                       % (capture, kind.replace("_", " "), frame, detail), err=True)
    return result


@main.command()
@capture_argument
@format_option
@quiet_option
@queue_depth_option
def summary(capture, fmt, quiet, queue_depth):
    """What every RTRS session in CAPTURE did (the default command).

    Paths, connections, handshake parameters, IO counts/bytes per direction,
    latency percentiles, errors, heartbeats, rkey refreshes, reconnects,
    disconnects and anomalies.  Exit 0 when the capture was read (even
    truncated: a warning goes to stderr), 1 when nothing could be read.
    """
    from .report.text import render
    result = _analyze(capture, quiet, keep_messages=False, queue_depth=queue_depth)
    if fmt == "json":
        click.echo(json.dumps(result.summary, indent=1))
    else:
        click.echo(render(result.summary), nl=False)


MESSAGE_KINDS = ("conn_req", "conn_rsp", "conn_rej", "info_req", "info_rsp", "read", "write",
                 "io_rsp", "rkey_rsp", "hb_msg", "hb_ack", "disconnect")


@main.command()
@capture_argument
@format_option
@quiet_option
@queue_depth_option
@click.option("--session", "session_filter", default=None,
              help="Only this session (name, paths_uuid or sess_uuid).")
@click.option("--msg", "msg_filter", multiple=True, type=click.Choice(MESSAGE_KINDS),
              help="Only these message kinds (repeatable).")
@click.option("--errors", is_flag=True, help="Only failed IO responses and rejects.")
def messages(capture, fmt, quiet, queue_depth, session_filter, msg_filter, errors):
    """One line per RTRS/RNBD message of CAPTURE (JSON lines with --format json)."""
    from .report.messages import message_line, select
    result = _analyze(capture, quiet, keep_messages=True, queue_depth=queue_depth)
    for record in select(result, session_filter, msg_filter, errors):
        if fmt == "json":
            click.echo(json.dumps(record, default=str))
        else:
            click.echo(message_line(record))


@main.command()
@capture_argument
@click.option("--frame", "frame_no", type=click.IntRange(1), required=True,
              help="Frame number, 1-based like Wireshark.")
@queue_depth_option
def show(capture, frame_no, queue_depth):
    """Scapy's show() of one frame plus what the session state adds."""
    from .report.messages import frame_context
    result = _analyze(capture, True, keep_messages=True, queue_depth=queue_depth)
    packet, context = frame_context(result, capture, frame_no)
    if packet is None:
        raise click.ClickException("%s has no frame %d" % (capture, frame_no))
    click.echo(packet.show(dump=True), nl=False)
    click.echo("###[ RTRS session state ]###")
    for line in context:
        click.echo("  " + line)


# Subcommands that live beside their subsystem register here.
from .wireshark.commands import wireshark as _wireshark; main.add_command(_wireshark)  # noqa: E402
from .craft.commands import craft as _craft; main.add_command(_craft)  # noqa: E402
