"""``rtrs-dissect compile``: compile the engine for this machine ahead of the first capture."""

import click

NOTICE = ("compiling the engine for this machine, once (about %d s; "
          "later runs load it at once)")


@click.command("compile")
def compile_engine():
    """Compile the engine for this machine now (installs do it; see docs/install.md).

    Needed after the engine's sources changed (a checkout), or in a container
    image build so that the first capture is read at once.  Exit 0 when every
    entry point is compiled (or was already)."""
    from ..analysis.warmup import COMPILE_SECONDS, ENTRY_POINTS, compile_engine as run, missing
    if not missing():
        click.echo("the engine is compiled for this machine (%d entry points)" % len(ENTRY_POINTS))
        return
    click.echo(NOTICE % COMPILE_SECONDS, err=True)
    click.echo("compiled %d entry points of the engine in %.1f s" % (len(ENTRY_POINTS), run()))


def ensure_compiled():
    """Before a command reads a capture: when the engine has no code for this machine
    yet, say so in one line on stderr and compile all of it (later runs load it)."""
    from ..analysis.warmup import COMPILE_SECONDS, compile_engine as run, missing
    if missing():
        click.echo("rtrs-dissect: " + NOTICE % COMPILE_SECONDS + "; 'rtrs-dissect compile' "
                   "does it ahead", err=True)
        run()
