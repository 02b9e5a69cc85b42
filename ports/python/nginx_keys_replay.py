"""Replays the key vectors (vectors/keys/v1/keys.json, recorded from real nginx) against ``nginx_keys``.

Every group is replayed on every build of its ``source.versions``, with the §12.6 rules of that release.
Expressions that read a variable the port does not model (the ``map`` expressions, ``$where`` (a ``set``),
captures and named captures: configuration, not request parsing, and this port reads no nginx
configuration) are skipped and counted; so are the tests on the ``routed`` listener, whose server and
location nginx chooses by regular expressions (routing is configuration too). The file leaves out
``$hostname`` itself (``notRecorded``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

import nginx_keys as nk

HERE = os.path.dirname(os.path.abspath(__file__))
RELATIVE = os.path.join("vectors", "keys", "v1", "keys.json")


def default_path() -> str:
    """vectors/keys/v1/keys.json of this checkout, else of the current directory or its nearest parent."""
    for start in (os.path.join(HERE, "..", ".."), os.getcwd()):
        d = os.path.abspath(start)
        while True:
            if os.path.isfile(os.path.join(d, RELATIVE)):
                return os.path.join(d, RELATIVE)
            if os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
    raise FileNotFoundError(f"no {RELATIVE} here or in a parent directory: give the file's path")


def _addr(text: str):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class Result:
    checked: int = 0
    mismatches: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # expression -> why
    groups: int = 0


def replay(path: str | None = None, rules_for=nk.KeyRules.for_version) -> Result:
    path = path or default_path()
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("algorithm") != "nginx-http-key" or doc.get("formatVersion") != 1:
        raise ValueError(f"{path}: not a formatVersion 1 key-vector file")
    listeners = {l["name"]: l for l in doc["listeners"]}
    exprs = [e["expression"] for e in doc["expressions"]]
    res = Result()
    for g in doc["testGroups"]:
        res.groups += 1
        for label in g["source"]["versions"]:
            rules = rules_for(label)
            for t in g["tests"]:
                if t["listener"] == "routed":
                    res.skipped["listener routed"] = "server and location chosen by the configuration"
                    continue
                l = listeners[t["listener"]]
                req = nk.Request(head=bytes.fromhex(t["requestHex"]), client=_addr(t["client"]),
                                 server=_addr(t["server"]), scheme=l["scheme"],
                                 server_name=l["serverName"].encode(), merge_slashes=l["mergeSlashes"])
                at = f'{g["name"]} on {label}, tcId {t["tcId"]} ({t["comment"]})'
                try:
                    parsed = nk.parse(req, rules)
                except nk.BadRequest as bad:
                    res.checked += 1
                    if t["outcome"] != "refused" or t["status"] != bad.status:
                        res.mismatches.append(f"{at}: port refuses ({bad}), nginx {t['outcome']} {t['status']}")
                    continue
                if t["outcome"] == "refused":
                    res.checked += 1
                    res.mismatches.append(f"{at}: nginx refused ({t['status']}), the port accepts")
                    continue
                for expr, want in zip(exprs, t["keys"]):
                    try:
                        got = nk.evaluate(expr, parsed, req, rules)
                    except nk.Unsupported as why:
                        res.skipped[expr] = str(why)
                        continue
                    res.checked += 1
                    if got != bytes.fromhex(want["hex"]):
                        res.mismatches.append(f"{at}: {expr}: nginx {bytes.fromhex(want['hex'])!r}, port {got!r}")
    return res


def cli(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else default_path()
    res = replay(path)
    for m in res.mismatches:
        print(m)
    for expr, why in sorted(res.skipped.items()):
        print(f"skipped {expr}: {why} (configuration, not modelled by this port)")
    print(f"keys: {res.checked} values checked in {res.groups} groups, {len(res.mismatches)} mismatches")
    return 1 if res.mismatches else 0


if __name__ == "__main__":
    sys.exit(cli())
