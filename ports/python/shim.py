#!/usr/bin/env python3
"""The Python port behind the shim protocol (ports/SHIM.md, versions 1 and 2): JSON lines on stdin, one answer per line.

    nginx-ketama replay-vectors --shim "python3 ports/python/shim.py"
    nginx-ketama verify --backend local --shim "python3 ports/python/shim.py"

An ``upstream`` message builds the port's Upstream (with the same peer parsing as the vector replay) and a fresh
Worker; ``request`` runs one request on it, the peers with ``refuses`` failing; ``reset`` starts a fresh Worker.
Protocol 2 (failure kinds, algorithm §5.1): the upstream carries a ``policy`` and peer ``answer``s, a request its
``method`` and optional ``now``, and the answer ``status`` and ``upstreamStatuses``.
A version the port does not model is answered ``{"unsupported": ...}``; an unknown op or a malformed message
``{"error": ...}``. Exits 0 when stdin ends.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash import ANSWERS, DEFAULT_POLICY, Rules, Upstream, Worker, parse_version  # noqa: E402
from nginx_hash_replay import NOW, build_upstream, group_policy  # noqa: E402

PROTOCOLS = (1, 2)
NEEDS_2 = "failure kinds (a policy or peer answers) need shim protocol 2, and this upstream says protocol 1"
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class Unsupported(Exception):
    """The port does not model this upstream."""


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def upstream_of(msg: dict):
    """The port's upstream for an ``upstream`` message, the clock, the protocol and the policy; Unsupported or
    ValueError/KeyError/TypeError."""
    protocol = msg.get("protocol", 1)
    if not is_int(protocol) or protocol not in PROTOCOLS:
        raise Unsupported(f"protocol {protocol!r} (this shim speaks 1 and 2)")
    if protocol == 1 and (msg.get("policy") is not None or any(
            isinstance(p, dict) and p.get("answer") is not None for p in msg.get("peers") or [])):
        raise Unsupported(NEEDS_2)
    if msg.get("method") not in (Upstream.CONSISTENT, Upstream.PLAIN):
        raise ValueError(f"unknown method {msg.get('method')!r}")
    version = msg.get("version")
    if not isinstance(version, str):
        raise ValueError("no version")
    parsed = parse_version(version)
    if parsed is None:
        raise Unsupported(f"unrecognised nginx version {version!r}")
    try:
        rules = Rules.for_version(parsed)
    except ValueError as e:
        raise Unsupported(f"nginx {version}: {e}") from None
    if not isinstance(msg.get("peers"), list):
        raise ValueError("no peers")
    now = msg.get("now", NOW)
    if not is_int(now):
        raise ValueError(f"now is not an integer: {now!r}")
    if protocol == 2 and msg.get("policy") is None:
        raise ValueError("a protocol-2 upstream without policy")
    for p in msg["peers"]:
        a = p.get("answer") if isinstance(p, dict) else None
        if a is not None and (not isinstance(a, str) or a == "refused" or a not in ANSWERS):
            raise Unsupported(f"peer answer {a!r} is not modelled")
    policy = group_policy(msg) if protocol == 2 else DEFAULT_POLICY
    # the same shape as a vector group: build_upstream reads method and peers (and their answers)
    return build_upstream(msg, rules), now, protocol, policy


def answer(msg, state: dict) -> dict:
    if not isinstance(msg, dict):
        return {"error": "a message must be a JSON object"}
    op = msg.get("op")
    if op == "upstream":
        state.clear()
        try:
            up, now, protocol, policy = upstream_of(msg)
        except Unsupported as e:
            return {"unsupported": str(e)}
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            return {"error": f"bad upstream: {e!r}"}
        state.update(upstream=up, now=now, protocol=protocol, policy=policy, worker=Worker(up))
        return {"ok": True}
    if op == "request":
        if "worker" not in state:
            return {"error": "request before a (supported) upstream"}
        hex_key = msg.get("keyHex")
        if not isinstance(hex_key, str):
            return {"error": "request without keyHex"}
        if len(hex_key) % 2 or not all(c in HEX_DIGITS for c in hex_key):
            return {"error": f"bad keyHex {hex_key!r}"}
        key = bytes.fromhex(hex_key)
        if state["protocol"] == 1:
            out = state["worker"].request(key, state["now"])
            return {"attempts": [p.address for p in out.attempts], "outcome": out.outcome}
        method = msg.get("method", "GET")
        if not isinstance(method, str) or not method:
            return {"error": f"bad method {method!r}"}
        now = msg.get("now", state["now"])
        if not is_int(now):
            return {"error": f"now is not an integer: {now!r}"}
        out = state["worker"].run(key, now, state["policy"], method)
        return {"attempts": [p.address for p in out.attempts], "outcome": out.outcome, "status": out.status,
                "upstreamStatuses": out.upstream_statuses}
    if op == "reset":
        if "upstream" not in state:
            return {"error": "reset before a (supported) upstream"}
        state["worker"] = Worker(state["upstream"])
        return {"ok": True}
    return {"error": f"unknown op {op!r}"}


def main() -> int:
    state: dict = {}
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError as e:
            reply = {"error": f"not JSON: {e}"}
        else:
            reply = answer(msg, state)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
