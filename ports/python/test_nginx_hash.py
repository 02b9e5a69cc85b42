"""Unit tests: the worked numbers (§1, §3.1, §4) and the vectors recorded from real nginx (§11 A-F) of
docs/nginx-algorithm.md.

Run: python3 -m unittest discover -s ports/python   (or: python3 ports/python/test_nginx_hash.py)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash import (  # noqa: E402
    Peer, Ring, Rules, Upstream, Worker, crc32, plain_hash, plain_owner, server_points, split_server)

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


if __name__ == "__main__":
    unittest.main()
