"""What the capture-reading commands share: options and the analysis run."""

import contextlib
import itertools
import os
import sys

import click

from .compile import ensure_compiled

EXIT_UNREADABLE = 1  # documented: nothing readable (missing, empty, not a capture, …)



class OutputPath(click.Path):
    """A file (or, with ``folder``, a folder) that a command writes: a name that looks
    like an option is refused (``-o --help`` once wrote a file named --help), and so is
    a place that cannot be written, before the capture is read (exit 2, one line)."""

    def __init__(self, folder=False, allow_dash=False):
        super().__init__(file_okay=not folder, dir_okay=folder, allow_dash=allow_dash)
        self.folder = folder

    def convert(self, value, param, ctx):
        text = os.fsdecode(value)
        if text.startswith("-") and not (self.allow_dash and text == "-"):
            self.fail("%r looks like an option, not a file name (./%s if it is one)"
                      % (text, text), param, ctx)
        value = super().convert(value, param, ctx)
        if text != "-":
            problem = _unwritable(os.path.abspath(text), self.folder)
            if problem:
                self.fail("cannot write %s: %s" % (text, problem), param, ctx)
        return value


def _unwritable(path, folder):
    """Why ``path`` cannot be written, or None.  A folder output is created with its
    parents, so its nearest existing ancestor must be writable; a file's folder must exist."""
    if os.path.exists(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    parent = os.path.dirname(path)
    if folder:
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return "no such folder %s" % parent
    return None if os.access(parent, os.W_OK | os.X_OK) else "permission denied in %s" % parent


@contextlib.contextmanager
def writing(path):
    """Where the place looked writable but the write fails all the same: one line, exit 1."""
    try:
        yield
    except OSError as exc:
        raise click.ClickException("cannot write %s: %s" % (path, exc.strerror or exc)) from None


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


def echo_batches(pieces, size=1000):
    """The output's pieces written as they are made, ``size`` of them a write (one
    write per line costs more than making it; all at once would hold them all)."""
    pieces = iter(pieces)
    batch = list(itertools.islice(pieces, size))
    while batch:
        click.echo("".join(batch), nl=False)
        batch = list(itertools.islice(pieces, size))


def analyze_capture(capture, quiet, keep_messages, queue_depth=None, until_frame=None,
                    analyze=None, io_sink=None, **options):
    """Run the analyzer with a progress bar on a terminal; one-line errors, exit 1.

    ``capture``: a path, or several (files, ``-``, directories: one capture merged
    in time order).  ``until_frame``: stop reading soon after that frame.
    ``analyze``: what runs the analysis (default ``analysis.analyze``; the parallel
    runners of rtrs_scapy/analysis/parallel.py), ``io_sink``: its IO rows (tables/ios.py);
    ``options`` go to it as they are (``keep_latencies``)."""
    from ..analysis import CaptureError
    from ..capture import SUPPORTED_LINK_TYPES, link_name
    if analyze is None:
        from ..analysis import analyze
    ensure_compiled()
    shown = capture if isinstance(capture, str) else " ".join(capture)
    bar = _Progress(quiet)
    try:
        result = analyze(capture, keep_messages=keep_messages, queue_depth=queue_depth,
                         until_frame=until_frame, progress=bar.update, io_sink=io_sink,
                         **options)
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


class DeviceMapping(click.ParamType):
    """``NAME=PATH[@SESSION]``: the client's name of a device (rnbd0=/dev/loop0@lab1)."""
    name = "NAME=PATH"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        client, _, rest = value.partition("=")
        path, _, session = rest.partition("@")
        if not client or not path:
            self.fail("%r is not NAME=PATH[@SESSION] (rnbd0=/dev/loop0@lab1)" % value,
                      param, ctx)
        return client, path, session or None


def kernel_log_option(command):
    """``--kernel-log FILE`` (repeatable) and ``--device-map NAME=PATH[@SESSION]``:
    the kernel's lines in capture time, the client's device names (docs/kernel-log.md)."""
    command = click.option(
        "--device-map", "device_map", multiple=True, type=DeviceMapping(),
        help="The client's name of a device: rnbd0=/dev/loop0 or rnbd0=/dev/loop0@lab1 "
             "(repeatable); --device accepts it.")(command)
    return click.option(
        "--kernel-log", "kernel_logs", multiple=True, metavar="FILE",
        type=click.Path(exists=True, dir_okay=False),
        help="A kernel log of a host of the capture (dmesg, dmesg -T, journalctl -k, a "
             "serial console; gzip too), repeatable: its RTRS/RNBD lines in capture time, "
             "its clock offset, the client's device names (rnbd0).")(command)


def with_kernel_logs(result, kernel_logs, device_map, say=True):
    """The whole summary of ``result`` with the kernel logs merged into it
    (kernel_log/merge.py), then the device map, and the placed lines for ``messages``;
    one line on stderr per log (``say``: where stdout does not show it).  (None, [])
    without logs and map: they match names and times across whole sessions, and
    without them a command need not make every session's summary at once."""
    if not kernel_logs and not device_map:
        return None, []
    from ..analysis.naming import apply_device_map
    summary = result.summary
    from ..kernel_log import merge, read_log
    from ..report.words import clock_offset_text, utc_iso
    year = int(utc_iso(summary["capture"]["first_ts"])[:4]) \
        if summary["capture"]["first_ts"] else None
    logs = []
    for path in kernel_logs:
        try:
            logs.append(read_log(path, year))
        except OSError as exc:
            raise click.ClickException("cannot read %s: %s" % (path, exc.strerror or exc)) \
                from None
    placed = merge(summary, logs) if logs else []
    for entry in summary.get("kernel_logs", ()) if say else ():
        click.echo("kernel log %s: %s" % (entry["file"], clock_offset_text(entry)), err=True)
    chosen(apply_device_map, "--device-map", summary["sessions"], list(device_map))
    return summary, placed


def chosen(find, option, *args):
    """``find(*args)``; its LookupError (an unknown --session, --device, …: the message
    lists the known ones) becomes a usage error of ``option``, exit 2."""
    try:
        return find(*args)
    except LookupError as exc:
        raise click.BadParameter(str(exc), param_hint="'%s'" % option) from None
