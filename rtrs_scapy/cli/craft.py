"""``rtrs-dissect craft``: write a crafted scenario as pcap, pcapng or gzip."""

import click

from ..craft.encap import DLT_EN10MB
from ..craft.mirror import WRAPPERS, mirrored
from ..craft.scenarios import CRAFTER_PARAMS, SCENARIOS, craft_frames, scenario_names
from ..craft.capture_files import DLT_ERF, write_capture, write_truth
from .common import OutputPath, writing


def _parse_value(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "yes", "y", "on"):
        return True
    if lowered in ("false", "no", "n", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    return text


def _assignments(params):
    """KEY=VALUE pairs as -p takes them (None as "none")."""
    return " ".join("%s=%s" % (k, "none" if v is None else v) for k, v in sorted(params.items()))


@click.command()
@click.argument("scenario", required=False)
@click.option("-o", "--output", type=OutputPath(),
              help="Capture to write: .pcap, .pcapng, .pcap.gz or .pcapng.gz.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of every random value (UUIDs, QPNs, PSNs, comm IDs, data).")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Scenario or crafter parameter, e.g. -p pmtu=4096 -p encap=ib.")
@click.option("--truth/--no-truth", default=False,
              help="Also write the ground truth to OUTPUT.truth.json.")
@click.option("--erf", is_flag=True,
              help="Native IB as ERF records, link type 197 (Wireshark reads these; it has "
                   "no link type 247); implies -p encap=ib.")
@click.option("--mirror", type=click.Choice(sorted(WRAPPERS)), metavar="KIND",
              help="Wrap every frame as a switch mirror or an overlay's underlay hands it "
                   "over: %s (docs/field.md)." % ", ".join(sorted(WRAPPERS)))
@click.option("--list", "list_", is_flag=True, help="List the scenarios and exit.")
def craft(scenario, output, seed, params, truth, erf, mirror, list_):
    """Craft an RTRS/RNBD capture from a named SCENARIO (see --list)."""
    if list_:
        for name in scenario_names():
            _fn, doc, defaults = SCENARIOS[name]
            extra = _assignments(defaults)
            click.echo("%-20s %s%s" % (name, doc, " [%s]" % extra if extra else ""))
        click.echo("common parameters: " + _assignments(CRAFTER_PARAMS))
        return
    if not scenario or not output:
        raise click.UsageError("SCENARIO and -o FILE are required (or --list)")
    if not (output.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz"))):
        raise click.UsageError("output must end in .pcap, .pcapng, .pcap.gz or .pcapng.gz")
    kwargs = {}
    for item in params:
        if "=" not in item:
            raise click.UsageError("parameter %r is not KEY=VALUE" % item)
        key, value = item.split("=", 1)
        kwargs[key.strip()] = _parse_value(value.strip())
    if erf:  # ERF carries native IB: --erf alone means -p encap=ib
        if kwargs.setdefault("encap", "ib") != "ib":
            raise click.UsageError("--erf writes native InfiniBand, not encap=%s"
                                   % kwargs["encap"])
    try:
        frames, truth_dict, linktype = craft_frames(scenario, seed=seed, **kwargs)
    except (KeyError, TypeError, ValueError) as exc:  # unknown scenario, parameter, value
        raise click.UsageError(str(exc.args[0] if exc.args else exc))
    if erf:
        linktype = DLT_ERF
    if mirror:
        if linktype != DLT_EN10MB:
            raise click.UsageError("--mirror wraps Ethernet frames, not encap=%s"
                                   % kwargs["encap"])
        frames = mirrored(frames, mirror)
    with writing(output):
        write_capture(output, frames, linktype=linktype)
    if truth:
        write_truth(output + ".truth.json", truth_dict)
    click.echo("%s: %d frames (%s, seed %d)" % (output, len(frames), scenario, seed), err=True)
