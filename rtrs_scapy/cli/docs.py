"""``rtrs-dissect docs [--check]``: the generated layout tables of docs/PROTOCOL.md."""

import os

import click


@click.command()
@click.option("--check", is_flag=True,
              help="Change nothing; exit 1 when a table is stale or missing.")
@click.option("--file", "path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The protocol reference (default: docs/PROTOCOL.md of this source tree).")
def docs(check, path):
    """Regenerate the layout tables of docs/PROTOCOL.md from the Scapy layers."""
    from ..layout import doc as layout_doc
    path = path or layout_doc.PROTOCOL_MD
    name = os.path.relpath(path)
    try:
        if check:
            found = layout_doc.problems(path)
            for problem in found:
                click.echo("%s: %s" % (name, problem), err=True)
            if found:
                raise SystemExit(1)
            click.echo("%s: tables are fresh" % name, err=True)
            return
        changed = layout_doc.write(path)
        with open(path, encoding="utf-8") as fh:
            absent = layout_doc.missing(fh.read())
    except (OSError, layout_doc.DocError) as exc:
        raise click.ClickException(str(exc)) from None
    for what in absent:
        click.echo("%s: missing block <!-- %s -->" % (name, what), err=True)
    click.echo("%s: %s" % (name, "tables rewritten" if changed else "tables already fresh"),
               err=True)
