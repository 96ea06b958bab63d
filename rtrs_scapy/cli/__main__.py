"""``python -m rtrs_scapy.cli``: the same as the ``rtrs-dissect`` command."""

from . import main

main()
