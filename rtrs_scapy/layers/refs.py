"""Named references between fields, readable by Scapy *and* by the layout IR.

``count_from=ref("sg_cnt")`` works as Scapy's callable and tells the IR (and so
the fast path and the Lua generator) which field holds the count.
"""


class ref:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, pkt):
        return pkt.getfieldval(self.name)

    def __repr__(self):
        return "ref(%r)" % self.name
