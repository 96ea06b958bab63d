"""``rtrs-dissect``: the command-line front end (click).

``rtrs-dissect FILE`` is ``rtrs-dissect summary FILE``, options included
(``rtrs-dissect --format json -q FILE``).  Products go to stdout, progress and
messages to stderr.  Exit codes: 0 = read and summarised (even when the capture
shows errors or is truncated), 1 = nothing readable, 2 = usage.

Each command lives in its own module of this package
and is registered here by name; its module is imported when it runs, so that
``rtrs-dissect FILE`` starts without what the other commands need (Scapy).
"""

import atexit
import gc
import importlib
import os

import click

# numpy's OpenBLAS starts a thread per core that spins before it sleeps: 0.1 s of CPU
# at every start, taken from the read-ahead thread on two cores.  Nothing here
# multiplies matrices.  Set before numpy is first imported (no command imports it
# before it runs).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

#: the words the group itself answers; anything else in front of a command is summary's
GROUP_OPTIONS = ("--help", "-h", "--version")


#: command name -> "module:attribute" (relative to this package)
COMMANDS = {
    "summary": ".summary:summary",
    "messages": ".messages:messages",
    "iostat": ".iostat:iostat",
    "show": ".messages:show",
    "shell": ".shell:shell",
    "craft": ".craft:craft",
    "wireshark": ".wireshark:wireshark",
    "docs": ".docs:docs",
    "report": ".report:report",
    "plot": ".plot:plot",
    "watch": ".watch:watch",
    "export": ".export:export",
    "sql": ".sql:sql",
    "compile": ".compile:compile_engine",
}


class DefaultToSummary(click.Group):
    """A group where a first word that is no command (a capture file, or an option of
    ``summary`` such as ``--format json``) means ``summary``; commands are loaded
    when they are used."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module, __name__), attribute)

    def parse_args(self, ctx, args):
        if args and args[0] not in COMMANDS and args[0] not in GROUP_OPTIONS:
            _no_misspelt_command(ctx, args[0])
            args = ["summary"] + list(args)
        return super().parse_args(ctx, args)

    def main(self, *args, **kwargs):
        # At exit the interpreter's last collection would walk every object of the
        # run (numba's types, the analysis): a summary of 3 M packets took 1.78 s
        # instead of 1.55 s.  Frozen, they are left to the end of the process.
        atexit.unregister(gc.freeze)
        atexit.register(gc.freeze)
        return _on_one_stack_chunk(super().main, args, kwargs)

    def format_usage(self, ctx, formatter):
        formatter.write_usage(ctx.command_path, "[--format json] [-q] [--queue-depth N] FILE")
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="       ")


def _on_one_stack_chunk(function, args, kwargs):
    """``function(*args, **kwargs)`` with room beneath it on the interpreter's frame stack
    (:data:`STACK_ROOM`)."""
    return function(*args, **kwargs)


#: Values that :func:`_on_one_stack_chunk`'s frame reserves.  CPython keeps its frames in
#: chunks of 16 KiB and, before 3.13, frees a chunk as soon as the frame at its start
#: returns, so a loop whose calls land just past the end of a chunk maps and unmaps one at
#: every call: importing numpy under ``summary`` did so 1,430 times, 10 ms of a 0.14 s run
#: (docs/benchmarks.md).  A frame this large gets a chunk of its own (1 MiB, mapped lazily:
#: it touches only its first words) and the calls beneath it fill the rest of that chunk.
STACK_ROOM = 1 << 16
_on_one_stack_chunk.__code__ = _on_one_stack_chunk.__code__.replace(
    co_stacksize=_on_one_stack_chunk.__code__.co_stacksize + STACK_ROOM)


def _no_misspelt_command(ctx, word):
    """``rtrs-dissect sumary x.pcap``: a word that is no file but nearly a command name
    is a usage error that names the command, not a missing capture."""
    if word.startswith("-") or os.path.exists(word):
        return
    import difflib     # (not at every start: a few ms)
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.75)
    if close:
        raise click.UsageError("no such command or file: %s (did you mean %s?)"
                               % (word, close[0]), ctx)


@click.group(cls=DefaultToSummary, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rtrs-scapy")
def main():
    """Decode and summarise Linux RTRS/RNBD traffic in InfiniBand/RoCE captures.

    rtrs-dissect FILE is rtrs-dissect summary FILE: what every session in the
    capture did (its options work there too: rtrs-dissect --format json FILE).
    Exit codes: 0 read and summarised, 1 nothing readable, 2 usage error.
    """
