"""Unit tests: the worked numbers (§1, §3.1, §4) and the vectors recorded from real nginx (§11 A-F) of
docs/nginx-algorithm.md.

Run: python3 -m unittest discover -s ports/python   (or: python3 ports/python/test_nginx_hash.py)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash import (  # noqa: E402
    BAD_HEADER, CLOSED, CONNECT_TIMEOUT, FAILED, NEXT, OK, READ_TIMEOUT, REFUSED, STALE_CACHED, TIMEOUT, Decision,
    Peer, Policy, Reply, Ring, Rules, Upstream, Worker, crc32, decide, plain_hash, plain_owner, response,
    server_points, split_server)

NOW = 1_000_000_000
FIVE = [f"127.0.0.1:{p}" for p in range(9001, 9006)]


def peers(servers, **kw):
    return [Peer(server=s.encode(), address=s, **kw) for s in servers]


def chain(up, key, worker=None):
    out = (worker or Worker(up)).request(key.encode(), NOW)
    return [p.address.rsplit(":", 1)[1] for p in out.attempts], out.outcome


class Spec(unittest.TestCase):
    def test_crc32(self):
        self.assertEqual(crc32(b"123456789"), 0xCBF43926)
        self.assertEqual(crc32(b""), 0)

    def test_split(self):
        self.assertEqual(split_server(b"[::1]:9101"), (b"[::1]", b"9101"))
        self.assertEqual(split_server(b"[::1]"), (b"[::1]", b""))
        self.assertEqual(split_server(b"unix:/tmp/s"), (b"/tmp/s", b""))
        self.assertEqual(split_server(b"UNIX:/tmp/s"), (b"/tmp/s", b""))
        self.assertEqual(split_server(b"host123"), (b"host123", b""))
        self.assertEqual(split_server(b"10.0.0.1"), (b"10.0.0.1", b""))

    def test_ring_points(self):
        self.assertEqual(server_points(b"127.0.0.1:9001", 1)[:3], [0x70533E04, 0x10571E62, 0x1F895401])
        self.assertEqual(server_points(b"127.0.0.1", 1)[0], 0xC3B5E186)
        self.assertEqual(server_points(b"127.0.0.1:80", 1)[0], 0xB205012F)

    def test_plain_numbers(self):
        self.assertEqual(plain_hash(b"k0", 0), 24841)
        self.assertEqual((24841 + plain_hash(b"k0", 1)) % 5, (24841 + 31288) % 5)
        self.assertEqual(plain_hash(b"k1", 0), 5646)


class NginxVectors(unittest.TestCase):
    """Algorithm §11 A-F: recorded from real nginx, one worker, fresh start, key $arg_k."""

    def test_a_consistent(self):
        ring = Ring((s.encode(), 1) for s in FIVE)
        self.assertEqual(len(ring), 800)
        self.assertEqual(crc32(b"k0"), 0xE109903F)
        self.assertEqual(ring.locate(0xE109903F), 700)
        self.assertEqual(ring.hashes[700], 0xE15B2F49)
        want = "9005 9003 9002 9003 9004 9001 9001 9003 9002 9005 9004 9002".split()
        up = Upstream("consistent", peers(FIVE))
        for i, port in enumerate(want):
            self.assertEqual(ring.owner(f"k{i}".encode()), f"127.0.0.1:{port}".encode(), f"k{i}")
            self.assertEqual(chain(up, f"k{i}"), ([port], "answered"), f"k{i}")

    def test_b_plain(self):
        want = "9002 9002 9003 9001 9003 9002 9005 9002 9002 9003 9003 9004".split()
        up = Upstream("plain", peers(FIVE))
        for i, port in enumerate(want):
            self.assertEqual(FIVE[plain_owner(f"k{i}".encode(), [1] * 5)], f"127.0.0.1:{port}", f"k{i}")
            self.assertEqual(chain(up, f"k{i}"), ([port], "answered"), f"k{i}")

    def _refusing(self, ports):
        return [Peer(server=f"127.0.0.1:{p}".encode(), address=f"127.0.0.1:{p}", max_fails=0,
                     refuses=p.startswith("99")) for p in ports]

    def test_c_consistent_failover(self):
        up = Upstream("consistent", self._refusing(["9001", "9002", "9901", "9902", "9903"]))
        want = {"k0": "9903 9901 9002", "k1": "9001", "k4": "9902 9903 9901 9002", "k6": "9903 9902 9001",
                "k9": "9903 9902 9901 9001", "k10": "9903 9901 9002", "k11": "9901 9002"}
        shared = Worker(up)
        for key, ports in want.items():
            self.assertEqual(chain(up, key), (ports.split(), "answered"), key)
            # max_fails=0 and unique names: the chain does not depend on history.
            self.assertEqual(chain(up, key, shared), (ports.split(), "answered"), key)

    def test_d_plain_failover(self):
        up = Upstream("plain", self._refusing(["9001", "9901", "9902", "9002"]))
        want = {"k0": "9901 9002", "k1": "9902 9901 9002", "k2": "9002", "k3": "9001", "k7": "9901 9002"}
        shared = Worker(up)
        for key, ports in want.items():
            self.assertEqual(chain(up, key), (ports.split(), "answered"), key)
            self.assertEqual(chain(up, key, shared), (ports.split(), "answered"), key)

    def test_e_mixed_servers(self):
        servers = [("127.0.0.1:9001", 3), ("127.0.0.1:9002", 1), ("[::1]:9101", 2), ("UNIX:/tmp/ngxrun/b.sock", 1)]
        ring = Ring((s.encode(), w) for s, w in servers)
        want = {"k0": "[::1]:9101", "k1": "127.0.0.1:9001", "k2": "127.0.0.1:9002", "k3": "[::1]:9101",
                "k9": "UNIX:/tmp/ngxrun/b.sock"}
        for key, server in want.items():
            self.assertEqual(ring.owner(key.encode()), server.encode(), key)

    def test_f_collision_first_listed_wins(self):
        a, b = b"127.0.0.1:20195", b"127.0.0.1:20412"
        self.assertEqual(server_points(a, 1)[45], 0x32A8F0FA)
        self.assertEqual(server_points(b, 1)[109], 0x32A8F0FA)
        for first, second in ((a, b), (b, a)):
            ring = Ring([(first, 1), (second, 1)])
            self.assertEqual(len(ring), 319)
            self.assertEqual(ring.owner(b"k261"), first)


class Behaviour(unittest.TestCase):
    """Properties algorithm §5 and §9 state, not nginx recordings."""

    def test_empty_key_is_weighted_round_robin(self):
        up = Upstream("consistent", [Peer(b"a:1", "a:1", weight=2), Peer(b"b:2", "b:2")])
        w = Worker(up)
        got = [w.request(b"", NOW).attempts[0].address for _ in range(6)]
        self.assertEqual(got, ["a:1", "b:2", "a:1"] * 2)

    def test_single_peer_one_attempt(self):
        up = Upstream("plain", [Peer(b"a:1", "a:1", refuses=True)])
        out = Worker(up).request(b"k", NOW)
        self.assertEqual((len(out.attempts), out.outcome), (1, "failed"))
        down = Upstream("plain", [Peer(b"a:1", "a:1", down=True)])
        out = Worker(down).request(b"k", NOW)
        self.assertEqual((out.attempts, out.outcome), ([], "noLiveUpstreams"))

    def test_plain_one_primary_with_backups_depends_on_version(self):
        def build(rules):
            return Upstream("plain", [Peer(b"p:1", "p:1", max_fails=0, refuses=True)],
                            [Peer(f"b:{i}".encode(), f"b:{i}", max_fails=0, refuses=i != 4) for i in (2, 3, 4)],
                            rules)
        old, new = build(Rules.for_version((1, 26, 3))), build(Rules.for_version((1, 30, 6)))
        differ = 0
        for i in range(100):
            key = f"k{i}".encode()
            a = [p.address for p in Worker(old).request(key, NOW).attempts]
            b = [p.address for p in Worker(new).request(key, NOW).attempts]
            self.assertEqual(a, ["p:1", "b:2", "b:3", "b:4"])
            self.assertEqual(b[:2], ["p:1", "b:2"])
            self.assertEqual(b[-1], "b:4")
            differ += a != b
        self.assertGreater(differ, 0)


class AttemptRule(unittest.TestCase):
    """decide(): the rows of algorithm §5.1's table and the statements around it (not nginx recordings)."""

    DEFAULT = Policy()  # proxy_next_upstream error timeout; no tries cap

    def d(self, reply, words=("error", "timeout"), method="GET", tries=3, single=False):
        return decide(reply, Policy.of(words), method, tries, single)

    def test_refused(self):
        self.assertEqual(self.d(REFUSED), Decision(FAILED, False, True, 502, None, 2))
        self.assertEqual(self.d(REFUSED, words=("timeout",)), Decision(FAILED, False, False, 502, 502, 2))
        # budget used up: FAILED all the same, 502 to the client
        self.assertEqual(self.d(REFUSED, tries=1), Decision(FAILED, False, False, 502, 502, 0))
        # not sent: a POST moves on without non_idempotent
        self.assertTrue(self.d(REFUSED, method="POST").retry)

    def test_off_and_default(self):
        self.assertEqual(Policy.of(["error", "OFF", "http_502"]).next_upstream, frozenset({"off"}))
        d = self.d(REFUSED, words=("off",))
        self.assertEqual((d.state, d.retry, d.client_status), (FAILED, False, 502))  # accounting goes on
        self.assertEqual(Policy().next_upstream, frozenset({"error", "timeout"}))
        self.assertFalse(decide(response(502), Policy(), "GET", 3).retry)  # no status retried unless listed
        with self.assertRaises(ValueError):
            Policy.of(["error", "http_501"])

    def test_timeouts(self):
        self.assertEqual(self.d(CONNECT_TIMEOUT), Decision(FAILED, False, True, 504, None, 2))
        self.assertEqual(self.d(READ_TIMEOUT, words=("error",)), Decision(FAILED, False, False, 504, 504, 2))
        self.assertTrue(self.d(CONNECT_TIMEOUT, method="POST").retry)  # before the request was sent
        self.assertFalse(self.d(READ_TIMEOUT, method="POST").retry)  # sent: needs non_idempotent
        self.assertTrue(self.d(READ_TIMEOUT, words=("timeout", "non_idempotent"), method="POST").retry)
        self.assertFalse(self.d(READ_TIMEOUT, method="PATCH").retry)
        self.assertFalse(self.d(READ_TIMEOUT, method="lock").retry)
        self.assertTrue(self.d(READ_TIMEOUT, method="PUT").retry)  # only POST, LOCK, PATCH are non-idempotent

    def test_closed_and_invalid_header(self):
        self.assertEqual(self.d(CLOSED), Decision(FAILED, False, True, 502, None, 2))
        self.assertFalse(self.d(CLOSED, method="POST").retry)
        self.assertEqual(self.d(BAD_HEADER), Decision(FAILED, False, False, 502, 502, 2))  # not listed by default
        self.assertTrue(self.d(BAD_HEADER, words=("invalid_header",)).retry)

    def test_error_on_a_cached_connection_is_given_back(self):
        self.assertEqual(self.d(STALE_CACHED, tries=1), Decision(FAILED, True, True, 502, None, 1))
        # a single peer gets a second attempt (its free sets pc.tries = 0, the give-back adds 1)
        self.assertEqual(self.d(STALE_CACHED, tries=1, single=True), Decision(FAILED, True, True, 502, None, 1))
        # given back, but a POST without non_idempotent stops; not listed: stops
        self.assertEqual(self.d(STALE_CACHED, method="POST"), Decision(FAILED, True, False, 502, 502, 3))
        self.assertFalse(self.d(STALE_CACHED, words=("timeout",)).retry)
        # a timeout on a cached connection is not given back
        self.assertEqual(self.d(Reply(TIMEOUT, cached=True), tries=1), Decision(FAILED, False, False, 504, 504, 0))

    def test_listed_statuses(self):
        words = ("error", "timeout", "http_500", "http_502", "http_503", "http_504", "http_429", "http_403",
                 "http_404")
        for s in (500, 502, 503, 504, 429):
            self.assertEqual(self.d(response(s), words, tries=2), Decision(FAILED, False, True, s, None, 1), s)
            # the last attempt's listed status is passed on, and freed as a success
            self.assertEqual(self.d(response(s), words, tries=1), Decision(OK, False, False, s, s, 0), s)
        for s in (403, 404):
            self.assertEqual(self.d(response(s), words, tries=2), Decision(NEXT, False, True, s, None, 1), s)
            self.assertEqual(self.d(response(s), words, tries=1), Decision(OK, False, False, s, s, 0), s)
        # not listed, or not listable
        self.assertEqual(self.d(response(502), ("http_503",)), Decision(OK, False, False, 502, 502, 2))
        for s in (200, 301, 400, 501):
            self.assertEqual(self.d(response(s), words), Decision(OK, False, False, s, s, 2), s)
        # a response means the request was sent: POST needs non_idempotent
        self.assertEqual(self.d(response(502), ("http_502",), "POST").state, OK)
        self.assertEqual(self.d(response(502), ("http_502", "non_idempotent"), "POST").state, FAILED)

    def test_single_list_never_retries_a_status(self):
        self.assertEqual(self.d(response(502), ("http_502",), tries=1, single=True).retry, False)


def two_peers(key: bytes, **kw):
    """A consistent upstream of two peers; returns it and (owner of key, the other) addresses."""
    ps = [Peer(b"127.0.0.1:9001", "127.0.0.1:9001", **kw), Peer(b"127.0.0.1:9002", "127.0.0.1:9002", **kw)]
    up = Upstream("consistent", ps)
    first = up.ring.owner(key).decode()
    return up, first, next(p.address for p in ps if p.address != first)


class FailureRequests(unittest.TestCase):
    """Whole requests under §5.1 on the worker: attempts, outcome, status, $upstream_status, what the peer keeps."""

    KEY = b"k0"
    P502 = Policy.of(["error", "timeout", "http_502"])

    def run_(self, w, answers, policy=P502, method="GET", now=NOW, key=KEY):
        out = w.run(key, now, policy, method, answer=lambda p: answers.get(p.address))
        return [p.address for p in out.attempts], out.outcome, out.status, out.upstream_statuses

    def test_listed_5xx_moves_on_and_fails_the_peer(self):
        up, a, b = two_peers(self.KEY)
        w = Worker(up)
        self.assertEqual(self.run_(w, {a: "http_502"}), ([a, b], "answered", 200, ["502", "200"]))
        # a was freed FAILED (max_fails=1): the next request skips it
        self.assertEqual(self.run_(w, {}), ([b], "answered", 200, ["200"]))

    def test_last_attempts_5xx_is_passed_on_as_a_success(self):
        up, a, b = two_peers(self.KEY)
        w = Worker(up)
        capped = Policy.of(["error", "timeout", "http_502"], tries=1)
        self.assertEqual(self.run_(w, {a: "http_502"}, capped), ([a], "answered", 502, ["502"]))
        self.assertEqual(self.run_(w, {}), ([a], "answered", 200, ["200"]))  # not failed
        # not listed: passed on, not failed
        self.assertEqual(self.run_(w, {a: "http_503"}), ([a], "answered", 503, ["503"]))
        self.assertEqual(self.run_(w, {}), ([a], "answered", 200, ["200"]))

    def test_404_is_next_not_failed(self):
        up, a, b = two_peers(self.KEY)
        w = Worker(up)
        pol = Policy.of(["error", "http_404"])
        self.assertEqual(self.run_(w, {a: "http_404"}, pol), ([a, b], "answered", 200, ["404", "200"]))
        self.assertEqual(self.run_(w, {}), ([a], "answered", 200, ["200"]))

    def test_non_idempotent(self):
        up, a, b = two_peers(self.KEY)
        self.assertEqual(self.run_(Worker(up), {a: "http_502"}, method="POST"), ([a], "answered", 502, ["502"]))
        pol = Policy.of(["error", "timeout", "http_502", "non_idempotent"])
        self.assertEqual(self.run_(Worker(up), {a: "http_502"}, pol, "POST"), ([a, b], "answered", 200, ["502", "200"]))
        # refused: the request was not sent, so a POST moves on
        self.assertEqual(self.run_(Worker(up), {a: "refused"}, method="POST"),
                         ([a, b], "answered", 200, ["502", "200"]))
        self.assertEqual(self.run_(Worker(up), {a: "timeout"}, method="POST"), ([a], "failed", 504, ["504"]))

    def test_timeout_and_invalid_header(self):
        up, a, b = two_peers(self.KEY)
        self.assertEqual(self.run_(Worker(up), {a: "timeout"}), ([a, b], "answered", 200, ["504", "200"]))
        self.assertEqual(self.run_(Worker(up), {a: "timeout"}, Policy.of(["error"])), ([a], "failed", 504, ["504"]))
        self.assertEqual(self.run_(Worker(up), {a: "invalid_header"}), ([a], "failed", 502, ["502"]))
        self.assertEqual(self.run_(Worker(up), {a: "invalid_header", b: "timeout"}, Policy.of(["invalid_header"])),
                         ([a, b], "failed", 504, ["502", "504"]))
        w = Worker(up)
        self.assertEqual(self.run_(w, {a: "refused"}, Policy.of(["off"])), ([a], "failed", 502, ["502"]))
        self.assertEqual(self.run_(w, {}), ([b], "answered", 200, ["200"]))  # off: a was failed all the same

    def test_no_live_upstreams_after_a_discarded_5xx(self):
        ps = [Peer(f"127.0.0.1:900{i}".encode(), f"127.0.0.1:900{i}") for i in (1, 2, 3)]
        up = Upstream("consistent", ps)
        third = ps[2].address
        key3 = next(k for k in (f"k{i}".encode() for i in range(100)) if up.ring.owner(k) == third.encode())
        w = Worker(up)
        # the third peer refuses once (and is failed for fail_timeout); then every peer answers 502
        attempts, outcome, status, statuses = self.run_(w, {third: "refused"}, key=key3)
        self.assertEqual((attempts[0], len(attempts), outcome, statuses), (third, 2, "answered", ["502", "200"]))
        attempts, outcome, status, statuses = self.run_(w, {p.address: "http_502" for p in ps})
        # budget 3, two live peers: both 502s are discarded (tries > 1), then get() finds nothing
        self.assertEqual((len(attempts), outcome, status, statuses),
                         (2, "noLiveUpstreams", 502, ["502", "502", "502"]))
        self.assertNotIn(third, attempts)

    def test_stale_keepalive_single_peer_gets_a_second_attempt(self):
        up = Upstream("consistent", [Peer(b"127.0.0.1:9001", "a")])
        w = Worker(up)
        st = {"a": "stale_keepalive"}
        self.assertEqual(self.run_(w, st), (["a"], "answered", 200, ["200"]))  # a fresh worker: no cached connection
        self.assertEqual(self.run_(w, st), (["a", "a"], "answered", 200, ["502", "200"]))
        self.assertEqual(self.run_(w, st, method="POST"), (["a"], "failed", 502, ["502"]))
        self.assertEqual(self.run_(w, st, method="POST"), (["a"], "answered", 200, ["200"]))
        self.assertEqual(self.run_(Worker(up), st), (["a"], "answered", 200, ["200"]))

    def test_stale_keepalive_given_back_even_with_tries_1(self):
        up, a, b = two_peers(self.KEY)
        w = Worker(up)
        pol = Policy.of(["error"], tries=1)
        st = {a: "stale_keepalive"}
        self.assertEqual(self.run_(w, st, pol), ([a], "answered", 200, ["200"]))
        self.assertEqual(self.run_(w, st, pol), ([a, b], "answered", 200, ["502", "200"]))
        self.assertEqual(self.run_(w, st, pol), ([b], "answered", 200, ["200"]))  # a failed (max_fails=1)

    def test_clock_fail_timeout_inclusive(self):
        up, a, b = two_peers(self.KEY, fail_timeout=10)
        w = Worker(up)
        self.assertEqual(self.run_(w, {a: "timeout"}, now=100), ([a, b], "answered", 200, ["504", "200"]))
        self.assertEqual(self.run_(w, {}, now=110), ([b], "answered", 200, ["200"]))
        self.assertEqual(self.run_(w, {}, now=111), ([a], "answered", 200, ["200"]))



class FailureGroupReplay(unittest.TestCase):
    """nginx_hash_replay on a hand-made failure group (FAILURE-FORMAT's fields; expectations from §5.1)."""

    def group(self, tests):
        peer = {"server": "127.0.0.1:9001", "address": "127.0.0.1:9001", "weight": 1, "down": False,
                "backup": False, "maxFails": 1, "failTimeout": 10, "refuses": False, "answer": "stale_keepalive"}
        return {"name": "hand-made", "method": "consistent", "stateful": True, "source": {"versions": ["1.30.6"]},
                "policy": {"nextUpstream": ["error", "timeout"], "tries": 0}, "peers": [peer], "tests": tests}

    def case(self, tc, method, attempts, outcome, status, statuses, clock=0):
        return {"tcId": tc, "key": "k", "keyHex": "6b", "requestMethod": method, "clock": clock,
                "attempts": attempts, "servers": attempts, "outcome": outcome, "status": status,
                "upstreamStatuses": statuses}

    def test_replays_method_statuses_and_catches_a_difference(self):
        from contextlib import redirect_stdout
        from io import StringIO
        from nginx_hash_replay import replay_group
        a = "127.0.0.1:9001"
        # a fresh worker has no cached connection; a 200 leaves one, which the next request meets stale
        good = [self.case(1, "GET", [a], "answered", 200, ["200"]),
                self.case(2, "GET", [a, a], "answered", 200, ["502", "200"], clock=1),
                self.case(3, "POST", [a], "failed", 502, ["502"], clock=1),
                self.case(4, "POST", [a], "answered", 200, ["200"], clock=3)]
        self.assertEqual(replay_group("hand-made", self.group(good)), (4, 0))
        for field, value in (("upstreamStatuses", ["200"]), ("status", 502), ("outcome", "failed"),
                             ("requestMethod", "POST")):
            bad = [dict(x) for x in good]
            bad[1][field] = value
            with redirect_stdout(StringIO()) as out:
                passed, failed = replay_group("hand-made", self.group(bad))
            self.assertEqual(passed + failed, 4)
            self.assertGreaterEqual(failed, 1, field)
            self.assertIn("FAIL hand-made tcId=2", out.getvalue())


class ShimProtocol2(unittest.TestCase):
    """shim.py speaks ports/SHIM.md versions 1 and 2."""

    PEERS = [{"server": "127.0.0.1:9001", "address": "127.0.0.1:9001", "weight": 1, "down": False, "backup": False,
              "maxFails": 1, "failTimeout": 10, "refuses": False},
             {"server": "127.0.0.1:9002", "address": "127.0.0.1:9002", "weight": 1, "down": False, "backup": False,
              "maxFails": 1, "failTimeout": 10, "refuses": False}]

    def upstream(self, protocol, answer=None, policy=None):
        peers = [dict(p) for p in self.PEERS]
        if answer is not None:
            peers[0]["answer"] = answer
        msg = {"op": "upstream", "protocol": protocol, "name": "parity", "method": "consistent",
               "version": "1.30.6", "now": NOW, "peers": peers}
        if policy is not None:
            msg["policy"] = policy
        return msg

    def test_versions(self):
        from shim import answer
        state: dict = {}
        pol = {"nextUpstream": ["error", "timeout", "http_502"], "tries": 0}
        self.assertEqual(answer(self.upstream(2, "http_502", pol), state), {"ok": True})
        # the first peer answers 502: it is the first attempt of a key it owns, retried for GET, passed on for POST
        key = next(k for k in (f"k{i}" for i in range(50))
                   if Ring([(b"127.0.0.1:9001", 1), (b"127.0.0.1:9002", 1)]).owner(k.encode()) == b"127.0.0.1:9001")
        got = answer({"op": "request", "keyHex": key.encode().hex(), "method": "GET", "now": NOW + 1}, state)
        self.assertEqual(got, {"attempts": ["127.0.0.1:9001", "127.0.0.1:9002"], "outcome": "answered",
                               "status": 200, "upstreamStatuses": ["502", "200"]})
        answer({"op": "reset"}, state)
        got = answer({"op": "request", "keyHex": key.encode().hex(), "method": "POST"}, state)
        self.assertEqual(got, {"attempts": ["127.0.0.1:9001"], "outcome": "answered", "status": 502,
                               "upstreamStatuses": ["502"]})
        self.assertIn("unsupported", answer(self.upstream(2, "http_418", pol), state))
        self.assertIn("unsupported", answer(self.upstream(3, None, pol), state))
        self.assertIn("error", answer(self.upstream(2), state))  # protocol 2 needs a policy
        self.assertIn("unsupported", answer(self.upstream(1, "http_502"), state))  # answers are protocol 2
        self.assertEqual(answer(self.upstream(1), state), {"ok": True})
        got = answer({"op": "request", "keyHex": key.encode().hex()}, state)
        self.assertEqual(got, {"attempts": ["127.0.0.1:9001"], "outcome": "answered"})

if __name__ == "__main__":
    unittest.main()
