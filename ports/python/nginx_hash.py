"""An independent Python port of nginx's upstream ``hash`` balancer (plain and ``consistent``).

Follows the project's description of the algorithm, docs/nginx-algorithm.md (the § numbers below are its
sections): CRC32 (§1), the peer lists (§2), the ketama ring and its lookup and per-request walk (§3), the plain
Cache::Memcached rehash (§4), and the round-robin fallback with failure accounting (§5). Standard library only.

The pure functions (:func:`ring_points`, :class:`Ring`, :func:`plain_hashes`, :func:`slot_owner`) answer "who owns
this key" on a healthy upstream; :class:`Worker` simulates one nginx worker process request by request, with the
state nginx keeps in its peers (smooth weighted round-robin weights, failure counts, timestamps).
"""

from __future__ import annotations

import bisect
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

MAX_HASH_MISSES = 20
POINTS_PER_WEIGHT = 160


def crc32(data: bytes) -> int:
    """Reflected CRC-32 (IEEE), the one nginx uses everywhere (§1)."""
    return zlib.crc32(data) & 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------------------------
# §3.1 The ketama ring


def split_server(server: bytes) -> tuple[bytes, bytes]:
    """Split a configured server string into the (host, port) nginx hashes (§3.1).

    ``unix:`` (any case) drops the prefix and has no port; otherwise the port is the run of trailing ASCII digits,
    but only if a ``:`` precedes it.
    """
    if len(server) >= 5 and server[:5].lower() == b"unix:":
        return server[5:], b""
    j = len(server)
    while j > 0 and 0x30 <= server[j - 1] <= 0x39:
        j -= 1
    if j > 0 and server[j - 1] == 0x3A:  # ':' before the (possibly empty) run of digits
        return server[: j - 1], server[j:]
    return server, b""


def server_points(server: bytes, weight: int) -> list[int]:
    """The ``160 * weight`` point hashes one server string contributes, in generation order."""
    host, port = split_server(server)
    base = host + b"\x00" + port
    prev = 0
    out = []
    for _ in range(POINTS_PER_WEIGHT * weight):
        prev = crc32(base + struct.pack("<I", prev))
        out.append(prev)
    return out


class Ring:
    """The consistent-hash ring of a primary peer list: sorted, de-duplicated (hash, server) points."""

    def __init__(self, servers: Iterable[tuple[bytes, int]]):
        """``servers``: (server string, weight) per primary peer, in list order (down peers included)."""
        points: list[tuple[int, bytes]] = []
        for server, weight in servers:
            points.extend((h, server) for h in server_points(server, weight))
        # Python's sort is stable: on equal hashes the earliest-generated point comes first (glibc behaviour, §3.2).
        points.sort(key=lambda p: p[0])
        self.hashes: list[int] = []
        self.servers: list[bytes] = []
        for h, s in points:
            if self.hashes and self.hashes[-1] == h:
                continue  # keep the first of every run of equal hashes
            self.hashes.append(h)
            self.servers.append(s)

    def __len__(self) -> int:
        return len(self.hashes)

    def locate(self, h: int) -> int:
        """Index of the first point whose hash is >= h; ``len(self)`` if none (callers wrap modulo, §3.3)."""
        return bisect.bisect_left(self.hashes, h)

    def server_at(self, index: int) -> bytes:
        return self.servers[index % len(self.hashes)]

    def owner(self, key: bytes) -> bytes:
        """The server string owning ``key`` when every peer is healthy and names are unique."""
        return self.server_at(self.locate(crc32(key)))


# ---------------------------------------------------------------------------------------------------------------
# §4 The plain hash


def plain_hash(key: bytes, rehash: int) -> int:
    """The 15-bit hash of attempt number ``rehash`` (0 = no prefix, then "1", "2", ... prepended)."""
    prefix = str(rehash).encode() if rehash > 0 else b""
    return (crc32(prefix + key) >> 16) & 0x7FFF


def slot_owner(weights: Sequence[int], acc: int) -> int:
    """Index of the peer owning slot ``acc mod sum(weights)`` (each peer owns ``weight`` consecutive slots)."""
    w = acc % sum(weights)
    p = 0
    while w >= weights[p]:
        w -= weights[p]
        p += 1
    return p


def plain_owner(key: bytes, weights: Sequence[int]) -> int:
    """The peer index the first plain-hash attempt lands on."""
    return slot_owner(weights, plain_hash(key, 0))


# ---------------------------------------------------------------------------------------------------------------
# Versions (§8): the rules that changed in the releases this port models (1.13.6 and later)


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = re.match(r"^\s*(\d+)\.(\d+)\.(\d+)", text)
    if m:
        return (int(m[1]), int(m[2]), int(m[3]))
    if text.strip().lower() in ("head", "master", "latest"):
        return (9999, 0, 0)
    return None


OLDEST_MODELLED = (1, 13, 6)


@dataclass(frozen=True)
class Rules:
    """The behaviour switches of one nginx version (only those >= 1.13.6 are modelled)."""

    plain_guard_on_number: bool = True  # 1.27.3: plain hash bypasses on `number < 2` instead of `single`
    down_excluded_from_budget: bool = True  # 1.19.6: pc.tries counts non-down peers only
    empty_key_round_robin: bool = True  # 1.17.1: an empty key goes straight to round-robin

    @staticmethod
    def for_version(v: tuple[int, int, int]) -> "Rules":
        if v < OLDEST_MODELLED:
            raise ValueError("nginx before 1.13.6 (no 20-miss RR fallback in chash, quick recovery) is not modelled")
        return Rules(
            plain_guard_on_number=v >= (1, 27, 3),
            down_excluded_from_budget=v >= (1, 19, 6),
            empty_key_round_robin=v >= (1, 17, 1),
        )


# ---------------------------------------------------------------------------------------------------------------
# Upstream and worker simulator (§2, §3.4, §4, §5)


@dataclass
class Peer:
    server: bytes  # the configured server string (hashed, compared byte-exact)
    address: str  # what $upstream_addr prints; identity for the replay
    weight: int = 1
    max_fails: int = 1
    fail_timeout: int = 10
    max_conns: int = 0
    down: bool = False
    refuses: bool = False  # connecting fails (replay input, not nginx config)


@dataclass
class _State:
    effective_weight: int
    current_weight: int = 0
    fails: int = 0
    accessed: int = 0
    checked: int = 0
    conns: int = 0


class Upstream:
    CONSISTENT = "consistent"
    PLAIN = "plain"

    def __init__(self, method: str, primary: list[Peer], backup: list[Peer] = (), rules: Rules = Rules()):
        if method not in (self.CONSISTENT, self.PLAIN):
            raise ValueError(f"unknown method {method!r}")
        if not primary:
            raise ValueError("an upstream needs at least one primary peer")
        self.method = method
        self.lists = [list(primary), list(backup)]
        self.rules = rules
        self.ring = Ring((p.server, p.weight) for p in primary) if method == self.CONSISTENT else None

    def single(self, li: int) -> bool:
        """nginx's `single` flag of list ``li`` (the backup list is never single)."""
        return li == 0 and len(self.lists[0]) == 1 and not self.lists[1]

    def budget(self) -> int:
        peers = self.lists[0] + self.lists[1]
        if self.rules.down_excluded_from_budget:
            return sum(1 for p in peers if not p.down)
        return len(peers)


@dataclass
class Outcome:
    attempts: list[Peer]
    outcome: str  # "answered" | "failed" | "noLiveUpstreams"
    round_robin: bool = False  # some pick (or the final BUSY) came from the round-robin code

    @property
    def status(self) -> int:
        return 200 if self.outcome == "answered" else 502


@dataclass
class _Request:
    key: bytes
    li: int  # current list: 0 primary, 1 backup
    tried: list[bool]
    point: int  # consistent: ring index (never advanced after a success)
    acc: int = 0  # plain: cumulative hash
    rehash: int = 0  # plain: next rehash number
    misses: int = 0  # hp->tries
    budget: int = 0  # pc->tries
    round_robin: bool = False


class Worker:
    """One nginx worker's state for one upstream; feed it requests in the order that worker saw them."""

    def __init__(self, upstream: Upstream):
        self.up = upstream
        self.states = [[_State(effective_weight=p.weight) for p in lst] for lst in upstream.lists]

    def request(self, key: bytes, now: int, fails: Callable[[Peer], bool] = lambda p: p.refuses) -> Outcome:
        """One request with ``proxy_next_upstream error``: pick, connect, retry until success, budget or BUSY."""
        up = self.up
        point = 0
        if up.ring is not None and len(up.ring):
            point = up.ring.locate(crc32(key))
        req = _Request(key=key, li=0, tried=[False] * max(len(l) for l in up.lists), point=point,
                       budget=up.budget())
        attempts: list[Peer] = []
        while True:
            i = self._get(req, now)
            if i is None:
                return Outcome(attempts, "noLiveUpstreams", req.round_robin)
            peer = up.lists[req.li][i]
            attempts.append(peer)
            failed = fails(peer)
            self._free(req, i, failed, now)
            if not failed:
                return Outcome(attempts, "answered", req.round_robin)
            if req.budget == 0:
                return Outcome(attempts, "failed", req.round_robin)

    # -- get ----------------------------------------------------------------------------------------------------

    def _get(self, req: _Request, now: int) -> int | None:
        up = self.up
        if up.method == Upstream.CONSISTENT:
            bypass = up.single(req.li)
        elif up.rules.plain_guard_on_number:
            bypass = len(up.lists[req.li]) < 2
        else:
            bypass = up.single(req.li)
        empty = up.rules.empty_key_round_robin and len(req.key) == 0
        if req.misses > MAX_HASH_MISSES or bypass or empty:
            return self._round_robin(req, now)
        if up.method == Upstream.CONSISTENT:
            if not up.lists[req.li] or up.ring is None or not len(up.ring):
                return None  # BUSY
            i = self._consistent(req, now)
        else:
            i = self._plain(req, now)
        if i is None:
            return self._round_robin(req, now)
        self._select(req, i, now)
        return i

    def _usable(self, peer: Peer, st: _State, now: int) -> bool:
        if peer.down:
            return False
        if peer.max_fails and st.fails >= peer.max_fails and now - st.checked <= peer.fail_timeout:
            return False
        return not (peer.max_conns and st.conns >= peer.max_conns)

    def _smooth_wrr(self, li: int, eligible: Callable[[int, Peer, _State], bool]) -> int | None:
        best = None
        total = 0
        states = self.states[li]
        for i, peer in enumerate(self.up.lists[li]):
            st = states[i]
            if not eligible(i, peer, st):
                continue
            st.current_weight += st.effective_weight
            total += st.effective_weight
            if st.effective_weight < peer.weight:
                st.effective_weight += 1
            if best is None or st.current_weight > states[best].current_weight:
                best = i
        if best is not None:
            states[best].current_weight -= total
        return best

    def _consistent(self, req: _Request, now: int) -> int | None:
        ring = self.up.ring
        while True:
            wanted = ring.server_at(req.point)
            chosen = self._smooth_wrr(
                req.li, lambda i, p, st: not req.tried[i] and self._usable(p, st, now) and p.server == wanted)
            if chosen is not None:
                return chosen
            req.point += 1
            req.misses += 1
            if req.misses > MAX_HASH_MISSES:
                return None

    def _plain(self, req: _Request, now: int) -> int | None:
        peers = self.up.lists[req.li]
        weights = [p.weight for p in peers]
        while True:
            req.acc = (req.acc + plain_hash(req.key, req.rehash)) & 0xFFFFFFFF
            req.rehash += 1
            p = slot_owner(weights, req.acc)
            if not req.tried[p] and self._usable(peers[p], self.states[req.li][p], now):
                return p
            req.misses += 1
            if req.misses > MAX_HASH_MISSES:
                return None

    def _select(self, req: _Request, i: int, now: int) -> None:
        peer = self.up.lists[req.li][i]
        st = self.states[req.li][i]
        st.conns += 1
        if now - st.checked > peer.fail_timeout:
            st.checked = now
        req.tried[i] = True

    def _round_robin(self, req: _Request, now: int) -> int | None:
        """ngx_http_upstream_get_round_robin_peer, including the sticky switch to the backup list."""
        req.round_robin = True
        up = self.up
        if up.single(req.li):
            peer, st = up.lists[req.li][0], self.states[req.li][0]
            if not peer.down and not (peer.max_conns and st.conns >= peer.max_conns):
                st.conns += 1
                return 0
        else:
            chosen = self._smooth_wrr(req.li, lambda i, p, st: not req.tried[i] and self._usable(p, st, now))
            if chosen is not None:
                self._select(req, chosen, now)
                return chosen
        if req.li == 0 and up.lists[1]:
            req.li = 1
            req.tried = [False] * len(req.tried)
            return self._round_robin(req, now)
        return None  # BUSY: "no live upstreams"

    # -- free ---------------------------------------------------------------------------------------------------

    def _free(self, req: _Request, i: int, failed: bool, now: int) -> None:
        peer = self.up.lists[req.li][i]
        st = self.states[req.li][i]
        if self.up.single(req.li):
            st.fails = 0
            st.conns -= 1
            req.budget = 0
            return
        if failed:
            st.fails += 1
            st.accessed = st.checked = now
            if peer.max_fails:
                st.effective_weight = max(0, st.effective_weight - peer.weight // peer.max_fails)
        elif st.accessed < st.checked:
            st.fails = 0
        st.conns -= 1
        if req.budget > 0:
            req.budget -= 1
