"""Unit tests of the key evaluation (nginx_keys.py, docs/nginx-algorithm.md §12): the key vectors recorded
from real nginx replay with no mismatch, and a port with any one rule changed fails them.

Run: python3 -m unittest discover -s ports/python
"""

import dataclasses
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nginx_keys as nk  # noqa: E402
from nginx_keys_replay import replay  # noqa: E402


def head(text):
    return text.replace("\n", "\r\n").encode()


class Spec(unittest.TestCase):
    def key(self, expr, text, version="1.30.6", merge=True):
        req = nk.Request(head=head(text), client=("127.0.0.2", 40000), server=("127.0.0.1", 80),
                         server_name=b"keys.test", merge_slashes=merge)
        rules = nk.KeyRules.for_version(version)
        return nk.evaluate(expr, nk.parse(req, rules), req, rules)

    def test_uri_is_decoded_and_normalised(self):
        self.assertEqual(self.key("$uri|$args", "GET /a/./b/%2E%2e//c?x=/../ HTTP/1.1\nHost: h\n"), b"/a/c|x=/../")

    def test_host_loses_port_case_and_dot(self):
        self.assertEqual(self.key("$host", "GET / HTTP/1.1\nHost: Ex.COM.:81\n"), b"ex.com")

    def test_repeated_headers_by_version(self):
        text = "GET / HTTP/1.1\nHost: h\nX-A: 1\nX-A: 2\n"
        self.assertEqual(self.key("$http_x_a", text, "1.22.1"), b"1")
        self.assertEqual(self.key("$http_x_a", text, "1.23.0"), b"1, 2")

    def test_binary_remote_addr(self):
        self.assertEqual(self.key("${binary_remote_addr}", "GET / HTTP/1.0\n"), bytes([127, 0, 0, 2]))

    def test_refusals(self):
        for text in ["GET /.. HTTP/1.1\nHost: h\n", "GET /%zz HTTP/1.1\nHost: h\n", "GET / HTTP/1.1\n"]:
            with self.assertRaises(nk.BadRequest):
                self.key("$uri", text)
        with self.assertRaises(nk.Unsupported):
            self.key("$hostname", "GET / HTTP/1.0\n")


class Vectors(unittest.TestCase):
    def test_replay_has_no_mismatch(self):
        res = replay()
        self.assertEqual(res.mismatches, [])
        self.assertGreater(res.checked, 5000)
        # Only the configuration's expressions (maps, set, captures) and the routed listener are skipped.
        self.assertEqual(sorted(res.skipped), ["$1|$2|$3", "$rx", "$tenant", "$where",
                                               "${sub}|${dom}|${leaf}|${sect}|${word}", "listener routed",
                                               "z=$zone|t=$tenant"])

    def test_changed_rules_fail(self):
        """Each rule changed alone fails the replay in the case it is about (so every rule is exercised)."""
        changes = {
            "headers joined with ',' (not ', ') on >= 1.23.0": (dict(header_separator=b","), "headers@"),
            "headers_joined flipped": ({"headers_joined": None}, "headers@"),
            "cookie_semicolon_only flipped": ({"cookie_semicolon_only": None}, "cookies@"),
            "strict_host flipped": ({"strict_host": None}, "host@"),
            "strict_request_line flipped": ({"strict_request_line": None}, "targets@"),
            "empty_path_query flipped": ({"empty_path_query": None}, "request-line@"),
        }
        for name, (change, group) in changes.items():
            def rules_for(label, change=change):
                r = nk.KeyRules.for_version(label)
                fields = {k: (not getattr(r, k)) if v is None else v for k, v in change.items()}
                return dataclasses.replace(r, **fields)
            with self.subTest(name):
                res = replay(rules_for=rules_for)
                self.assertTrue(any(m.startswith(group) for m in res.mismatches),
                                f"{name}: no mismatch in {group}*")


if __name__ == "__main__":
    unittest.main()
