"""An independent Python port of nginx's upstream ``hash`` balancer (plain and ``consistent``).

Follows the project's description of the algorithm, docs/nginx-algorithm.md (the § numbers below are its
sections): CRC32 (§1), the peer lists (§2), the ketama ring and its lookup and per-request walk (§3), the plain
Cache::Memcached rehash (§4), the round-robin fallback with failure accounting (§5), and what each kind of attempt
does (§5.1: :class:`Policy`, :class:`Reply`, :func:`decide`, :meth:`Worker.run`). Standard library only.

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
# §5.1 What each kind of attempt does: the retry policy and the rule for one attempt

NEXT_UPSTREAM_WORDS = frozenset({"error", "timeout", "invalid_header", "http_500", "http_502", "http_503", "http_504",
                                 "http_403", "http_404", "http_429", "non_idempotent", "updating", "off"})
RETRIED_STATUSES = frozenset({500, 502, 503, 504, 403, 404, 429})  # the statuses proxy_next_upstream can list
NON_IDEMPOTENT_METHODS = frozenset({"POST", "LOCK", "PATCH"})


@dataclass(frozen=True)
class Policy:
    """``proxy_next_upstream`` (its words, any case; ``off`` anywhere makes it ``off`` alone) and
    ``proxy_next_upstream_tries`` (0: no cap). ``proxy_next_upstream_timeout`` is not modelled (0, none), and the
    request body is buffered (the default)."""

    next_upstream: frozenset = frozenset({"error", "timeout"})  # nginx's default
    tries: int = 0

    @staticmethod
    def of(words: Iterable[str], tries: int = 0) -> "Policy":
        ws = frozenset(w.lower() for w in words)
        unknown = ws - NEXT_UPSTREAM_WORDS
        if unknown:
            raise ValueError(f"unknown proxy_next_upstream value(s) {sorted(unknown)}")
        if tries < 0:
            raise ValueError(f"negative proxy_next_upstream_tries {tries}")
        return Policy(frozenset({"off"}) if "off" in ws else ws, tries)

    def lists(self, condition: str) -> bool:
        return "off" not in self.next_upstream and condition in self.next_upstream


DEFAULT_POLICY = Policy()

# Reply kinds: the failure kinds of ngx_http_upstream_next(), and a response with a status
ERROR, TIMEOUT, INVALID_HEADER, RESPONSE = "error", "timeout", "invalid_header", "response"


@dataclass(frozen=True)
class Reply:
    """What one attempt met: ``kind`` (error, timeout, invalid_header, or a response with ``status``), whether the
    request had been sent ("request sent", §5.1) and whether the attempt ran on a cached keepalive connection."""

    kind: str
    status: int = 0
    sent: bool = True
    cached: bool = False


def response(status: int) -> Reply:
    return Reply(RESPONSE, status)


REFUSED = Reply(ERROR, sent=False)  # connection refused
CONNECT_TIMEOUT = Reply(TIMEOUT, sent=False)
CLOSED = Reply(ERROR)  # closed or reset before the header
READ_TIMEOUT = Reply(TIMEOUT)  # read or send timeout
BAD_HEADER = Reply(INVALID_HEADER)
STALE_CACHED = Reply(ERROR, cached=True)  # error on a cached keepalive connection

# A peer's answer as the failure vectors name it (peers[i].answer), plus "refused" for `refuses`
REFUSED_ANSWER, STALE_KEEPALIVE = "refused", "stale_keepalive"
ANSWERS = frozenset({REFUSED_ANSWER, "timeout", "invalid_header", STALE_KEEPALIVE}
                    | {f"http_{s}" for s in RETRIED_STATUSES})


def reply_of(answer: str | None) -> Reply:
    """The Reply of an answer (not stale_keepalive, which depends on the worker's cached connections)."""
    if answer is None:
        return response(200)
    if answer == REFUSED_ANSWER:
        return REFUSED
    if answer == "timeout":
        return READ_TIMEOUT
    if answer == "invalid_header":
        return BAD_HEADER
    if answer in ANSWERS and answer.startswith("http_"):
        return response(int(answer[5:]))
    raise ValueError(f"unknown peer answer {answer!r}")


def peer_answer(peer: "Peer") -> str | None:
    return REFUSED_ANSWER if peer.refuses else peer.answer


# the state an attempt's peer is freed with (ngx_http_upstream_free_round_robin_peer)
FAILED, NEXT, OK = "FAILED", "NEXT", "OK"


@dataclass(frozen=True)
class Decision:
    state: str  # FAILED, NEXT or OK (success, state 0)
    given_back: bool  # the attempt does not count against the budget (an error on a cached connection)
    retry: bool  # the request moves on to another get()
    upstream_status: int  # this attempt's entry in $upstream_status
    client_status: int | None  # what the client gets when the request ends here (None when retried)
    tries: int  # pc.tries after the free (and the give-back)


def decide(reply: Reply, policy: Policy, method: str, tries: int, single: bool = False) -> Decision:
    """Algorithm §5.1 for one attempt. ``tries``: pc.tries before this attempt is freed; ``single``: the current
    list is nginx's ``single`` list (whose free sets pc.tries to 0, §5)."""
    after = 0 if single else max(tries - 1, 0)
    idempotent_ok = method.upper() not in NON_IDEMPOTENT_METHODS or policy.lists("non_idempotent")
    if reply.kind == RESPONSE:
        s = reply.status
        # a listed status counts only if another attempt will really happen: budget left after this one
        if s in RETRIED_STATUSES and tries > 1 and policy.lists(f"http_{s}") and idempotent_ok:
            return Decision(NEXT if s in (403, 404) else FAILED, False, True, s, None, after)
        return Decision(OK, False, False, s, s, after)
    if reply.kind not in (ERROR, TIMEOUT, INVALID_HEADER):
        raise ValueError(f"unknown reply kind {reply.kind!r}")
    given_back = reply.cached and reply.kind == ERROR  # a timeout on a cached connection is not given back
    if given_back:
        after += 1
    status = 504 if reply.kind == TIMEOUT else 502
    retry = after > 0 and policy.lists(reply.kind) and (not reply.sent or idempotent_ok)
    return Decision(FAILED, given_back, retry, status, None if retry else status, after)


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
    refuses: bool = False  # connecting fails (replay input, not nginx configuration)
    answer: str | None = None  # what the peer answers when it does not refuse (§5.1; None: 200 OK), see ANSWERS


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
    status: int = 0  # the status the client got
    upstream_statuses: list[str] = field(default_factory=list)  # $upstream_status split on ", "


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
        # keepalive (§5.1): per address, whether this worker holds a cached connection to it (only stale_keepalive
        # peers are tracked: a cached connection to any other peer answers as a new one would)
        self.cached: dict[str, bool] = {}

    def request(self, key: bytes, now: int, fails: Callable[[Peer], bool] = lambda p: p.refuses) -> Outcome:
        """One request with ``proxy_next_upstream error``: pick, connect, retry until success, budget or BUSY.

        ``fails(peer)``: that peer's connection is refused; every other peer answers 200.
        """
        return self.run(key, now, answer=lambda p: REFUSED_ANSWER if fails(p) else None)

    def run(self, key: bytes, now: int, policy: Policy = DEFAULT_POLICY, method: str = "GET",
            answer: Callable[[Peer], str | None] | None = None) -> Outcome:
        """One request under ``policy`` (§5.1) with the request ``method``, at clock ``now``.

        ``answer(peer)`` names what that peer does (one of ANSWERS, or None for 200 OK); by default the peer's own
        ``refuses`` and ``answer`` fields. Every attempt is judged by :func:`decide`.
        """
        up = self.up
        if answer is None:
            answer = peer_answer
        point = 0
        if up.ring is not None and len(up.ring):
            point = up.ring.locate(crc32(key))
        budget = up.budget()
        if policy.tries and policy.tries < budget:
            budget = policy.tries  # proxy_next_upstream_tries, applied once at the start (§5)
        req = _Request(key=key, li=0, tried=[False] * max(len(l) for l in up.lists), point=point, budget=budget)
        attempts: list[Peer] = []
        statuses: list[str] = []
        while True:
            i = self._get(req, now)
            if i is None:
                statuses.append("502")  # the peerless last attempt of "no live upstreams"
                return Outcome(attempts, "noLiveUpstreams", req.round_robin, 502, statuses)
            peer = up.lists[req.li][i]
            attempts.append(peer)
            reply = self._reply(peer, answer(peer))
            d = decide(reply, policy, method, req.budget, up.single(req.li))
            self._free(req, i, d.state, now)
            req.budget = d.tries
            statuses.append(str(d.upstream_status))
            if not d.retry:
                outcome = "answered" if reply.kind == RESPONSE else "failed"
                return Outcome(attempts, outcome, req.round_robin, d.client_status, statuses)

    def _reply(self, peer: Peer, answer: str | None) -> Reply:
        """What an attempt at ``peer`` meets; a ``stale_keepalive`` peer depends on the worker's cached connection."""
        if answer == STALE_KEEPALIVE:
            if self.cached.get(peer.address, False):
                self.cached[peer.address] = False
                return STALE_CACHED
            self.cached[peer.address] = True
            return response(200)
        return reply_of(answer)

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

    def _free(self, req: _Request, i: int, state: str, now: int) -> None:
        """ngx_http_upstream_free_round_robin_peer with ``state`` FAILED, NEXT or OK (§5); the budget is decide()'s."""
        peer = self.up.lists[req.li][i]
        st = self.states[req.li][i]
        if self.up.single(req.li):
            st.fails = 0
            st.conns -= 1
            return
        if state == FAILED:
            st.fails += 1
            st.accessed = st.checked = now
            if peer.max_fails:
                st.effective_weight = max(0, st.effective_weight - peer.weight // peer.max_fails)
        elif st.accessed < st.checked:
            st.fails = 0
        st.conns -= 1
