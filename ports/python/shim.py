#!/usr/bin/env python3
"""The Python port behind the shim protocol (ports/SHIM.md, version 1): JSON lines on stdin, one answer per line.

    nginx-ketama replay-vectors --shim "python3 ports/python/shim.py"
    nginx-ketama verify --backend local --shim "python3 ports/python/shim.py"

An ``upstream`` message builds the port's Upstream (with the same peer parsing as the vector replay) and a fresh
Worker; ``request`` runs one request on it, the peers with ``refuses`` failing; ``reset`` starts a fresh Worker.
A version the port does not model is answered ``{"unsupported": ...}``; an unknown op or a malformed message
``{"error": ...}``. Exits 0 when stdin ends.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash import Rules, Upstream, Worker, parse_version  # noqa: E402
from nginx_hash_replay import NOW, build_upstream  # noqa: E402

PROTOCOL = 1
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class Unsupported(Exception):
    """The port does not model this upstream."""


def upstream_of(msg: dict) -> tuple[Upstream, int]:
    """The port's upstream for an ``upstream`` message, and the clock; Unsupported or ValueError/KeyError/TypeError."""
    if msg.get("protocol", PROTOCOL) != PROTOCOL:
        raise Unsupported(f"protocol {msg.get('protocol')!r} (this shim speaks {PROTOCOL})")
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
    if not isinstance(now, int) or isinstance(now, bool):
        raise ValueError(f"now is not an integer: {now!r}")
    # the same shape as a vector group: build_upstream reads method and peers
    return build_upstream(msg, rules), now


def answer(msg, state: dict) -> dict:
    if not isinstance(msg, dict):
        return {"error": "a message must be a JSON object"}
    op = msg.get("op")
    if op == "upstream":
        state.clear()
        try:
            up, now = upstream_of(msg)
        except Unsupported as e:
            return {"unsupported": str(e)}
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            return {"error": f"bad upstream: {e!r}"}
        state.update(upstream=up, now=now, worker=Worker(up))
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
        out = state["worker"].request(key, state["now"])
        return {"attempts": [p.address for p in out.attempts], "outcome": out.outcome}
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
