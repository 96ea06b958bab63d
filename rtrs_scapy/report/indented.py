"""JSON indented exactly as ``json.dumps(value, indent=N)`` writes it, made mostly by
the standard library's C encoder.

``indent`` sends the standard library to its pure-Python encoder, a generator per
container: a summary of many short sessions spent a sixth of its time there
(docs/benchmarks.md, "The summary's JSON from the C encoder").  Yet the C encoder takes
any item separator: a container whose values hold no container (most of a summary's:
counters, percentiles) is one call of it with the separator ``",\\n"`` and the
indentation of its items; only the containers that hold containers are walked here.
Scalars are written by the same C functions either way, so the text is the same, byte
for byte.
"""

from json import JSONEncoder
from json.encoder import c_make_encoder, encode_basestring_ascii

_SCALARS = (str, int, float, bool, type(None))
_ARRAYS = (list, tuple)


def _encoder(item_separator):
    """The C encoder with these separators; a function of a value to its text."""
    encode = c_make_encoder(None, JSONEncoder().default, encode_basestring_ascii, None, ": ",
                            item_separator, False, False, True)
    return lambda value: "".join(encode(value, 0))


class IndentedJson:
    """``text(value, level)``: ``value`` as ``json.dumps(value, indent=indent)`` writes
    it, as if it stood ``level`` containers deep (its lines after the first indented
    so much more)."""

    def __init__(self, indent=1):
        self.indent = indent
        self.scalar = _encoder(", ")
        self.flat = {}      # level -> the encoder of a container of scalars at that level

    def text(self, value, level=0):
        parts = []
        self._add(value, level, parts)
        return "".join(parts)

    def _add(self, value, level, parts):
        if isinstance(value, dict):
            values = value.values()
        elif isinstance(value, _ARRAYS):
            values = value
        else:
            parts.append(self.scalar(value))
            return
        if not value:
            parts.append("{}" if isinstance(value, dict) else "[]")
            return
        inner = "\n" + " " * (self.indent * (level + 1))
        outer = "\n" + " " * (self.indent * level)
        if all(isinstance(v, _SCALARS) for v in values):
            text = self._flat(level)(value)
            parts.append(text[0] + inner + text[1:-1] + outer + text[-1])
            return
        if isinstance(value, dict):
            parts.append("{")
            for k, (key, item) in enumerate(value.items()):
                parts.append(("," if k else "") + inner + self._key(key) + ": ")
                self._add(item, level + 1, parts)
            parts.append(outer + "}")
        else:
            parts.append("[")
            for k, item in enumerate(value):
                parts.append(("," if k else "") + inner)
                self._add(item, level + 1, parts)
            parts.append(outer + "]")

    def _flat(self, level):
        encode = self.flat.get(level)
        if encode is None:
            encode = self.flat[level] = _encoder(",\n" + " " * (self.indent * (level + 1)))
        return encode

    def _key(self, key):
        """A dict key's text, converted as the encoders convert it (an int, a float, a
        bool or None becomes its JSON text, quoted)."""
        if isinstance(key, str):
            return encode_basestring_ascii(key)
        text = self.scalar({key: 0})
        return text[1:text.rindex(":")]
