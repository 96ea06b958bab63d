"""Requests and responses in (session, buf_id, frame) order, paired in one compiled
pass (analysis/pairing.py says the rule; docs/PROTOCOL.md#pairing-requests-and-responses):
it was two dozen numpy passes over a batch."""

from ..capture.jit import compiled


@compiled
def pair_scan(order, sess, key, n_req, path, response_request, replaced_by, pending,
              failover, reused, first_frame, first_stamp):
    """``order``: the requests (positions below ``n_req``) and responses of ``sess`` and
    ``key`` sorted by session, buf_id and frame.  A response answers the request just
    before it in its group; a request followed in its group by a request was replaced by
    it (on another path: a failover, else reused); a request last in its group is
    pending.  A chain of failovers keeps its first send's ``first_frame`` and
    ``first_stamp``.  ``response_request`` and ``replaced_by`` come filled with -1,
    ``pending``, ``failover`` and ``reused`` with False."""
    n = order.shape[0]
    root = -1           # the request a chain of failovers started with
    for k in range(n):
        at = order[k]
        before = order[k - 1] if k > 0 else -1
        same = k > 0 and sess[at] == sess[before] and key[at] == key[before]
        follows_a_request = same and before < n_req
        if at >= n_req:
            if follows_a_request:
                response_request[at - n_req] = before
            continue
        after = order[k + 1] if k + 1 < n else -1
        pending[at] = after < 0 or sess[after] != sess[at] or key[after] != key[at]
        if follows_a_request:
            replaced_by[before] = at
            failover[at] = path[at] != path[before]
            reused[at] = not failover[at]
        if follows_a_request and failover[at]:
            first_frame[at] = first_frame[root]
            first_stamp[at] = first_stamp[root]
        else:
            root = at
