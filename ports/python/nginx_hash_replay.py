"""Replay the project's golden vectors (vectors/v1/*.json, recorded from real nginx) against the Python port.

Usage: python3 ports/python/replay.py [DIR_OR_FILE ...]   or, installed (pip install ./ports/python):
replay [DIR_OR_FILE ...]

Without arguments the vectors are looked for in ``vectors/v1`` of the repository this file sits in (when run from a
checkout), else in ``vectors/v1`` under the current directory or its nearest parent that has one (an installed
``replay`` run from anywhere inside a checkout).

Failure groups (those with a ``policy``, algorithm §5.1) run each test under the group's policy with its
``requestMethod``, at ``NOW + clock``, each peer doing what its ``answer`` says; ``status`` and ``upstreamStatuses``
are compared too. A group with a policy word or peer answer the port does not know is a SKIP.

Prints one line per failing test and a closing line ``N passed, M failed[, K skipped]``. Exits non-zero if any
test failed, a file could not be read, or no test ran at all.
"""

from __future__ import annotations

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nginx_hash import (  # noqa: E402
    ANSWERS, DEFAULT_POLICY, Peer, Policy, Rules, Upstream, Worker, crc32, parse_version)

NOW = 1_000_000_000  # one constant clock for every request (vectors with max_fails>0 use fail_timeout 3600)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_vectors() -> str:
    """``vectors/v1`` of the checkout holding this file, else of the current directory or its nearest parent."""
    candidates = [os.path.join(REPO, "vectors", "v1")]
    d = os.getcwd()
    while True:
        candidates.append(os.path.join(d, "vectors", "v1"))
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for c in candidates:
        if os.path.isdir(c):
            return c
    return os.path.join(os.getcwd(), "vectors", "v1")


def vector_files(args: list[str]) -> list[str]:
    if not args:
        args = [default_vectors()]
    files = []
    for a in args:
        if os.path.isdir(a):
            files.extend(sorted(glob.glob(os.path.join(a, "*.json"))))
        else:
            files.append(a)
    # schema.json (if it sits next to the vectors) is not a vector file
    return [f for f in files if os.path.basename(f) != "schema.json"]


def test_key(t: dict) -> bytes:
    if t.get("keyHex") is not None:
        return bytes.fromhex(t["keyHex"])
    if t.get("key") is not None:
        return t["key"].encode("utf-8")
    raise ValueError("test has neither keyHex nor key")


def group_rules(group: dict) -> list[Rules]:
    """One rule set per distinct behaviour among the group's nginx versions (each must reproduce the vectors)."""
    versions = (group.get("source") or {}).get("versions") or []
    if not versions:
        return [Rules()]
    out: list[Rules] = []
    for v in versions:
        parsed = parse_version(str(v))
        if parsed is None:
            raise ValueError(f"unrecognised nginx version {v!r}")
        rules = Rules.for_version(parsed)
        if rules not in out:
            out.append(rules)
    return out


def peer_answer_field(p: dict) -> str | None:
    """A peer's ``answer`` (failure groups, §5.1): absent is 200 OK; one this port does not know: ValueError."""
    a = p.get("answer")
    if a is not None and (not isinstance(a, str) or a == "refused" or a not in ANSWERS):
        raise ValueError(f"peer answer {a!r} is not modelled")
    return a


def group_policy(group: dict) -> Policy:
    """A failure group's ``policy`` (proxy_next_upstream words and tries); nginx's default elsewhere."""
    pol = group.get("policy")
    if pol is None:
        return DEFAULT_POLICY
    words = pol.get("nextUpstream")
    tries = pol.get("tries", 0)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words) or not words:
        raise ValueError(f"policy.nextUpstream is not a list of words: {words!r}")
    if not isinstance(tries, int) or isinstance(tries, bool):
        raise ValueError(f"policy.tries is not an integer: {tries!r}")
    return Policy.of(words, tries)


def test_clock(t: dict) -> int:
    """The worker's clock at this test: one value, or T0 + ``clock`` in groups where the clock advances."""
    clock = t.get("clock", 0)
    if not isinstance(clock, int) or isinstance(clock, bool) or clock < 0:
        raise ValueError(f"clock is not a non-negative integer: {clock!r}")
    return NOW + clock


def build_upstream(group: dict, rules: Rules) -> Upstream:
    primary, backup = [], []
    for p in group["peers"]:
        peer = Peer(
            server=p["server"].encode("utf-8"),
            address=p["address"],
            weight=int(p.get("weight", 1)),
            max_fails=int(p.get("maxFails", 1)),
            fail_timeout=int(p.get("failTimeout", 10)),
            max_conns=int(p.get("maxConns", 0)),
            down=bool(p.get("down", False)),
            refuses=bool(p.get("refuses", False)),
            answer=peer_answer_field(p),
        )
        (backup if p.get("backup") else primary).append(peer)
    return Upstream(group["method"], primary, backup, rules)


def fmt(attempts: list[str], outcome: str) -> str:
    return "[" + ", ".join(attempts) + "] " + outcome


def check(t: dict, out, key: bytes) -> str | None:
    """None if ``out`` reproduces test ``t``, else a description of the difference."""
    got = [p.address for p in out.attempts]
    want = list(t.get("attempts", []))
    problems = []
    if (got, out.outcome) != (want, t.get("outcome")):
        problems.append(f"expected {fmt(want, t.get('outcome'))} got {fmt(got, out.outcome)}")
    if "servers" in t:
        got_servers = [p.server.decode("utf-8", "replace") for p in out.attempts]
        if got_servers != list(t["servers"]) and not problems:
            problems.append(f"servers expected {t['servers']} got {got_servers}")
    if "status" in t and t["status"] != out.status:
        problems.append(f"status expected {t['status']} got {out.status}")
    if "upstreamStatuses" in t and list(t["upstreamStatuses"]) != out.upstream_statuses:
        problems.append(f"upstreamStatuses expected {t['upstreamStatuses']} got {out.upstream_statuses}")
    if t.get("crc32") is not None and int(t["crc32"], 16) != crc32(key):
        problems.append(f"crc32 expected {t['crc32']} got {crc32(key):08x}")
    return "; ".join(problems) or None


def replay_group(name: str, group: dict) -> tuple[int, int]:
    tests = sorted(group.get("tests", []), key=lambda t: t["tcId"])
    stateful = bool(group.get("stateful", False))
    policy = group_policy(group)
    failures: dict[int, list[str]] = {}
    for rules in group_rules(group):
        up = build_upstream(group, rules)
        shared = Worker(up)
        for t in tests:
            key = test_key(t)
            worker = shared if stateful else Worker(up)
            method = t.get("requestMethod", "GET")
            problem = check(t, worker.run(key, test_clock(t), policy, method), key)
            if problem:
                failures.setdefault(t["tcId"], []).append(problem + ("" if len(group_rules(group)) == 1 else
                                                                     f" (model {rules})"))
    for t in tests:
        if t["tcId"] in failures:
            shown = t.get("key") if t.get("key") is not None else "hex:" + t.get("keyHex", "")
            print(f"FAIL {name} tcId={t['tcId']} key={shown!r}: {' | '.join(failures[t['tcId']])}")
    return len(tests) - len(failures), len(failures)


def main(argv: list[str]) -> int:
    passed = failed = skipped = 0
    errors = 0
    files = vector_files(argv)
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"ERROR {path}: {e}")
            errors += 1
            continue
        base = os.path.basename(path)
        groups = doc.get("testGroups", [])
        count = sum(len(g.get("tests", [])) for g in groups)
        if "numberOfTests" in doc and doc["numberOfTests"] != count:
            print(f"WARN {base}: numberOfTests is {doc['numberOfTests']} but the file holds {count} tests")
        for gi, group in enumerate(groups):
            name = f"{base}:{group.get('name', '#' + str(gi))}"
            try:
                group_rules(group)
                if group.get("method") not in ("consistent", "plain"):
                    raise ValueError(f"unknown method {group.get('method')!r}")
                # This port sorts ring points stably (glibc's rule); groups recorded only on musl need musl's.
                if "glibc" not in group.get("libc", ["glibc"]):
                    raise ValueError("needs musl's tie rule (docs/nginx-algorithm.md §3.2); this port models glibc")
                # failure groups (§5.1): a policy word or a peer answer this port does not know
                group_policy(group)
                for p in group.get("peers", []):
                    peer_answer_field(p)
            except ValueError as e:
                print(f"SKIP {name}: {e}")
                skipped += len(group.get("tests", []))
                continue
            try:
                p, m = replay_group(name, group)
            except (KeyError, ValueError, TypeError) as e:
                print(f"ERROR {name}: malformed group: {e!r}")
                errors += 1
                continue
            passed += p
            failed += m
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    if errors:
        print(f"{errors} file(s)/group(s) could not be replayed")
    print(line)
    if not files:
        print(f"no vector files found (looked in {argv or default_vectors()})", file=sys.stderr)
    return 1 if failed or errors or passed + failed == 0 else 0


def cli() -> None:
    """The ``replay`` console entry point of the installed package."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    cli()
