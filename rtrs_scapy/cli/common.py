"""What the capture-reading commands share: options and the analysis run."""

import sys

import click

EXIT_UNREADABLE = 1  # documented: nothing readable (missing, empty, not a capture, …)

capture_argument = click.argument("capture", type=click.Path(dir_okay=False))
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                             default="text", show_default=True, help="Output format.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
queue_depth_option = click.option(
    "--queue-depth", type=click.IntRange(1, 65535), default=None,
    help="Queue depth for paths whose handshake is not in the capture (else inferred).")


def analyze_capture(capture, quiet, keep_messages, queue_depth=None, until_frame=None,
                    io_sink=None):
    """Run the analyzer with a progress bar on a terminal; one-line errors, exit 1.
    ``until_frame``: stop reading soon after that frame; ``io_sink``: gets the IO rows."""
    from ..analysis import CaptureError, analyze
    from ..capture import SUPPORTED_LINK_TYPES, link_name, open_capture
    try:
        with open_capture(capture) as probe:
            total = probe.bytes_total
    except CaptureError as exc:
        raise click.ClickException(str(exc)) from None
    show_bar = not quiet and sys.stderr.isatty() and total
    try:
        if not show_bar:
            result = analyze(capture, keep_messages=keep_messages, queue_depth=queue_depth,
                             until_frame=until_frame, io_sink=io_sink)
        else:
            with click.progressbar(length=total, file=sys.stderr, label="reading") as bar:
                done = [0]

                def progress(position):
                    bar.update(position - done[0])
                    done[0] = position
                result = analyze(capture, keep_messages=keep_messages,
                                 queue_depth=queue_depth, progress=progress,
                                 until_frame=until_frame, io_sink=io_sink)
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
