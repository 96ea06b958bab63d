"""What the capture-reading commands share: options and the analysis run."""

import sys

import click

from .compile import ensure_compiled

EXIT_UNREADABLE = 1  # documented: nothing readable (missing, empty, not a capture, …)

capture_argument = click.argument("capture", type=click.Path(dir_okay=False, allow_dash=True))
#: what summary and messages read: files, ``-`` (stdin), directories; one capture
captures_argument = click.argument("captures", nargs=-1, required=True,
                                   type=click.Path(allow_dash=True))
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                             default="text", show_default=True, help="Output format.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
queue_depth_option = click.option(
    "--queue-depth", type=click.IntRange(1, 65535), default=None,
    help="Queue depth for paths whose handshake is not in the capture (else inferred).")


def analyze_capture(capture, quiet, keep_messages, queue_depth=None, until_frame=None,
                    analyze=None, io_sink=None):
    """Run the analyzer with a progress bar on a terminal; one-line errors, exit 1.

    ``capture``: a path, or several (files, ``-``, directories: one capture merged
    in time order).  ``until_frame``: stop reading soon after that frame.
    ``analyze``: what runs the analysis (default ``analysis.analyze``; the parallel
    runners of rtrs_scapy/analysis/parallel.py), ``io_sink``: its IO rows (tables/ios.py)."""
    from ..analysis import CaptureError
    from ..capture import SUPPORTED_LINK_TYPES, link_name
    if analyze is None:
        from ..analysis import analyze
    ensure_compiled()
    shown = capture if isinstance(capture, str) else " ".join(capture)
    bar = _Progress(quiet)
    try:
        result = analyze(capture, keep_messages=keep_messages, queue_depth=queue_depth,
                         until_frame=until_frame, progress=bar.update, io_sink=io_sink)
    except CaptureError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        bar.close()
    unsupported = result.link_types - SUPPORTED_LINK_TYPES
    if unsupported and not result.analyzer.ib_frames:
        raise click.ClickException("%s: link type %s is not supported (Ethernet, Linux cooked, "
                                   "raw IP, InfiniBand, ERF)" % (
                                       shown, ", ".join(link_name(t) for t in unsupported)))
    if result.truncated:
        for frame, kind, detail in result.problems:
            click.echo("warning: %s: capture %s at frame %d: %s; summary of what was read"
                       % (shown, kind.replace("_", " "), frame, detail), err=True)
    return result


class _Progress:
    """A progress bar on a terminal, once the size of the input is known."""

    def __init__(self, quiet):
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar = None
        self.done = 0

    def update(self, position, total):
        if not self.enabled or not total:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, file=sys.stderr, label="reading")
            self.bar.__enter__()
        self.bar.update(position - self.done)
        self.done = position

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
