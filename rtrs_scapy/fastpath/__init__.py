"""Fast, Scapy-free capture reading and frame location."""
