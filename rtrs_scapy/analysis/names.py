"""Addresses as text: IPv4, IPv6 (IPv4-mapped shown as IPv4), IB LIDs."""

import socket


def address_text(raw):
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, bytes(raw))
    if len(raw) == 16:
        text = socket.inet_ntop(socket.AF_INET6, bytes(raw))
        return text[7:] if text.startswith("::ffff:") and "." in text else text
    return "LID 0x%04x" % int.from_bytes(raw, "big")
