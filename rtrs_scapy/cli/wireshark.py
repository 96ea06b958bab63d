"""``rtrs-dissect wireshark export|install``: the generated Lua dissector."""

import click

from ..wireshark.generate import generate
from ..wireshark.install import install as install_plugin
from .common import OutputPath, writing


@click.group()
def wireshark():
    """Wireshark/tshark Lua dissector generated from the Scapy layers."""


@wireshark.command()
@click.option("-o", "--output", type=OutputPath(allow_dash=True),
              default="-", show_default=True, help="Write the Lua file here ('-' = stdout).")
def export(output):
    """Generate the Lua dissector (wireshark/rtrs.lua)."""
    text = generate()
    if output == "-":
        click.echo(text, nl=False)
        return
    with writing(output), open(output, "w", encoding="utf-8") as fh:
        fh.write(text)
    click.echo("wrote %s" % output, err=True)


@wireshark.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Plugin folder (default: Wireshark's personal Lua plugin folder).")
def install(directory):
    """Install the dissector into the personal Wireshark plugin folder; print where."""
    click.echo(install_plugin(directory))
