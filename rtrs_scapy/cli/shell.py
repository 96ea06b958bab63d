"""``rtrs-dissect shell``: Scapy's interactive shell with the layers loaded."""

import click


@click.command()
def shell():
    """Scapy's interactive shell with every RTRS/RNBD layer loaded."""
    from scapy.main import interact
    # interact() parses its own options from argv (sys.argv by default, which holds
    # "shell" here and makes it stop with "Too many parameters")
    interact(mydict=layer_namespace(), argv=["rtrs-dissect"])


def layer_namespace():
    import scapy.all
    import rtrs_scapy
    names = {k: v for k, v in vars(scapy.all).items() if not k.startswith("_")}
    names.update({k: getattr(rtrs_scapy, k) for k in rtrs_scapy.__all__})
    return names
