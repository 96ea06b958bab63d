"""Markdown as GitHub reads it: heading anchors, and the prose outside code (the docs
tests and the protocol document's tests share these)."""

import re


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading: code spans and links keep their
    text, everything is lower case, punctuation other than '-' and '_' goes, spaces
    become '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _outside_fences(text):
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield line


def prose(text):
    """The text outside fenced blocks and code spans, line by line."""
    return (re.sub(r"`[^`]*`", "", line) for line in _outside_fences(text))


def anchors(text):
    """Anchors of every heading outside fenced code, in order, duplicates numbered
    like GitHub."""
    found, seen = [], {}
    for line in _outside_fences(text):
        match = re.match(r"#{1,6} +(.+?) *#* *$", line)
        if match:
            base = github_anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.append(base if count == 0 else "%s-%d" % (base, count))
    return found
