package nginxhash;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Self-check against the worked numbers and the vectors recorded from real nginx in docs/nginx-algorithm.md
 * (§11 A-F), plus the JSON parser. Runs without any vector files: {@code java -cp build nginxhash.SpecVectors}.
 */
public final class SpecVectors {
    private static int checks;
    private static int failures;

    private static void eq(Object want, Object got, String what) {
        checks++;
        boolean same = want instanceof byte[] a && got instanceof byte[] b ? Arrays.equals(a, b) : want.equals(got);
        if (!same) {
            failures++;
            System.out.println("FAIL " + what + ": expected " + show(want) + " got " + show(got));
        }
    }

    private static String show(Object o) {
        return o instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(o);
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static List<Peer> peers(List<String> servers, boolean refusing99) {
        List<Peer> out = new ArrayList<>();
        for (String s : servers) {
            boolean refuses = refusing99 && s.contains(":99");
            out.add(new Peer(b(s), s, 1, refusing99 ? 0 : 1, 10, 0, false, refuses));
        }
        return out;
    }

    private static String chain(Upstream up, String key) {
        Worker.Outcome o = new Worker(up).request(b(key), Replay.NOW);
        List<String> ports = new ArrayList<>();
        for (Peer p : o.attempts()) {
            ports.add(p.address().substring(p.address().lastIndexOf(':') + 1));
        }
        return String.join(" ", ports) + " " + o.outcomeName();
    }

    public static void main(String[] args) {
        eq(0xCBF43926L, Crc.crc32(b("123456789")), "crc32(123456789)");
        eq(0L, Crc.crc32(new byte[0]), "crc32('')");
        long[] pts = Ring.serverPoints(b("127.0.0.1:9001"), 1);
        eq(List.of(0x70533e04L, 0x10571e62L, 0x1f895401L), List.of(pts[0], pts[1], pts[2]), "points 127.0.0.1:9001");
        eq(0xc3b5e186L, Ring.serverPoints(b("127.0.0.1"), 1)[0], "p0 127.0.0.1");
        eq(0xb205012fL, Ring.serverPoints(b("127.0.0.1:80"), 1)[0], "p0 127.0.0.1:80");
        eq("[::1]|9101", splitShow("[::1]:9101"), "split [::1]:9101");
        eq("[::1]|", splitShow("[::1]"), "split [::1]");
        eq("/tmp/s|", splitShow("UNIX:/tmp/s"), "split UNIX:/tmp/s");
        eq("host123|", splitShow("host123"), "split host123");
        eq(24841L, PlainHash.hash(b("k0"), 0), "plain h0(k0)");
        eq(31288L, PlainHash.hash(b("k0"), 1), "plain h1(k0)");
        eq(5646L, PlainHash.hash(b("k1"), 0), "plain h0(k1)");

        List<String> five = new ArrayList<>();
        for (int p = 9001; p <= 9005; p++) {
            five.add("127.0.0.1:" + p);
        }
        // A: consistent, five servers.
        Upstream a = new Upstream(Upstream.Method.CONSISTENT, peers(five, false), List.of(), Rules.LATEST);
        eq(800, a.ring().size(), "A ring size");
        eq(700, a.ring().locate(Crc.crc32(b("k0"))), "A k0 index");
        eq(0xe15b2f49L, a.ring().hashAt(700), "A point 700");
        String[] wantA = "9005 9003 9002 9003 9004 9001 9001 9003 9002 9005 9004 9002".split(" ");
        for (int i = 0; i < wantA.length; i++) {
            eq(wantA[i] + " answered", chain(a, "k" + i), "A k" + i);
        }
        // B: plain, same servers.
        Upstream bUp = new Upstream(Upstream.Method.PLAIN, peers(five, false), List.of(), Rules.LATEST);
        String[] wantB = "9002 9002 9003 9001 9003 9002 9005 9002 9002 9003 9003 9004".split(" ");
        for (int i = 0; i < wantB.length; i++) {
            eq(wantB[i] + " answered", chain(bUp, "k" + i), "B k" + i);
        }
        // C: consistent with closed ports (max_fails=0).
        Upstream c = new Upstream(Upstream.Method.CONSISTENT,
                peers(List.of("127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9901", "127.0.0.1:9902", "127.0.0.1:9903"),
                        true), List.of(), Rules.LATEST);
        Map<String, String> wantC = new LinkedHashMap<>();
        wantC.put("k0", "9903 9901 9002");
        wantC.put("k1", "9001");
        wantC.put("k4", "9902 9903 9901 9002");
        wantC.put("k6", "9903 9902 9001");
        wantC.put("k9", "9903 9902 9901 9001");
        wantC.put("k10", "9903 9901 9002");
        wantC.put("k11", "9901 9002");
        wantC.forEach((k, v) -> eq(v + " answered", chain(c, k), "C " + k));
        // D: plain with closed ports.
        Upstream d = new Upstream(Upstream.Method.PLAIN,
                peers(List.of("127.0.0.1:9001", "127.0.0.1:9901", "127.0.0.1:9902", "127.0.0.1:9002"), true),
                List.of(), Rules.LATEST);
        Map<String, String> wantD = new LinkedHashMap<>();
        wantD.put("k0", "9901 9002");
        wantD.put("k1", "9902 9901 9002");
        wantD.put("k2", "9002");
        wantD.put("k3", "9001");
        wantD.put("k7", "9901 9002");
        wantD.forEach((k, v) -> eq(v + " answered", chain(d, k), "D " + k));
        // E: weights, IPv6, unix.
        Ring e = new Ring(List.of(b("127.0.0.1:9001"), b("127.0.0.1:9002"), b("[::1]:9101"), b("UNIX:/tmp/ngxrun/b.sock")),
                List.of(3, 1, 2, 1));
        Map<String, String> wantE = new LinkedHashMap<>();
        wantE.put("k0", "[::1]:9101");
        wantE.put("k1", "127.0.0.1:9001");
        wantE.put("k2", "127.0.0.1:9002");
        wantE.put("k3", "[::1]:9101");
        wantE.put("k9", "UNIX:/tmp/ngxrun/b.sock");
        wantE.forEach((k, v) -> eq(b(v), e.owner(b(k)), "E " + k));
        // F: a hash collision; the server listed first owns the point.
        byte[] x = b("127.0.0.1:20195");
        byte[] y = b("127.0.0.1:20412");
        eq(0x32a8f0faL, Ring.serverPoints(x, 1)[45], "F 20195 #45");
        eq(0x32a8f0faL, Ring.serverPoints(y, 1)[109], "F 20412 #109");
        Ring f1 = new Ring(List.of(x, y), List.of(1, 1));
        Ring f2 = new Ring(List.of(y, x), List.of(1, 1));
        eq(319, f1.size(), "F ring size");
        eq(x, f1.owner(b("k261")), "F k261 (20195 first)");
        eq(y, f2.owner(b("k261")), "F k261 (20412 first)");

        // The JSON parser.
        Object j = Json.parse("{\"a\": [1, -2.5e1, true, false, null, \"\\u00e9\\ud83d\\ude00\\n\\\"\"], \"b\": {}}");
        eq("{a=[1, -25.0, true, false, null, \u00e9\ud83d\ude00\n\"], b={}}", String.valueOf(j), "json");
        for (String bad : List.of("{", "[1,]", "{\"a\" 1}", "01", "\"\\x\"", "[1] 2", "tru", "\"a\nb\"")) {
            checks++;
            try {
                Json.parse(bad);
                failures++;
                System.out.println("FAIL json accepted invalid input " + bad);
            } catch (IllegalArgumentException expected) {
                // rejected, as it should be
            }
        }

        attemptRule();
        failureRequests();
        shimProtocol2();

        System.out.println((checks - failures) + " passed, " + failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }

    // ---- §5.1: the rule for one attempt (the table's rows and the statements around it) ----

    private static Attempt.Policy pol(int tries, String... words) {
        return Attempt.Policy.of(List.of(words), tries);
    }

    private static String dec(Attempt.Reply r, Attempt.Policy p, String method, int tries, boolean single) {
        Attempt.Decision d = Attempt.decide(r, p, method, tries, single);
        return d.state() + (d.givenBack() ? " back" : "") + (d.retry() ? " retry" : " stop")
                + " up=" + d.upstreamStatus()
                + " client=" + d.clientStatus() + " tries=" + d.tries();
    }

    private static void attemptRule() {
        Attempt.Policy et = pol(0, "error", "timeout");
        eq("FAILED retry up=502 client=0 tries=2", dec(Attempt.Reply.REFUSED, et, "GET", 3, false), "refused");
        eq("FAILED stop up=502 client=502 tries=2", dec(Attempt.Reply.REFUSED, pol(0, "timeout"), "GET", 3, false),
                "refused, error not listed");
        eq("FAILED stop up=502 client=502 tries=0", dec(Attempt.Reply.REFUSED, et, "GET", 1, false), "refused, budget");
        eq("FAILED retry up=502 client=0 tries=2", dec(Attempt.Reply.REFUSED, et, "POST", 3, false), "refused POST");
        eq(Set.of("off"), pol(0, "error", "OFF", "http_502").nextUpstream(), "off alone");
        eq("FAILED stop up=502 client=502 tries=2", dec(Attempt.Reply.REFUSED, pol(0, "off"), "GET", 3, false), "off");
        eq(Set.of("error", "timeout"), Attempt.Policy.DEFAULT.nextUpstream(), "default policy");
        eq("OK stop up=502 client=502 tries=2",
                dec(Attempt.Reply.response(502), Attempt.Policy.DEFAULT, "GET", 3, false),
                "502 not listed by default");
        eq("FAILED retry up=504 client=0 tries=2", dec(Attempt.Reply.CONNECT_TIMEOUT, et, "POST", 3, false),
                "connect timeout POST");
        eq("FAILED stop up=504 client=504 tries=2", dec(Attempt.Reply.READ_TIMEOUT, pol(0, "error"), "GET", 3, false),
                "read timeout, timeout not listed");
        eq("FAILED stop up=504 client=504 tries=2", dec(Attempt.Reply.READ_TIMEOUT, et, "POST", 3, false),
                "read timeout POST");
        eq("FAILED retry up=504 client=0 tries=2",
                dec(Attempt.Reply.READ_TIMEOUT, pol(0, "timeout", "non_idempotent"), "POST", 3, false),
                "read timeout POST non_idempotent");
        eq("FAILED stop up=504 client=504 tries=2", dec(Attempt.Reply.READ_TIMEOUT, et, "patch", 3, false), "PATCH");
        eq("FAILED stop up=504 client=504 tries=2", dec(Attempt.Reply.READ_TIMEOUT, et, "LOCK", 3, false), "LOCK");
        eq("FAILED retry up=504 client=0 tries=2", dec(Attempt.Reply.READ_TIMEOUT, et, "PUT", 3, false), "PUT");
        eq("FAILED retry up=502 client=0 tries=2", dec(Attempt.Reply.CLOSED, et, "GET", 3, false), "closed");
        eq("FAILED stop up=502 client=502 tries=2", dec(Attempt.Reply.INVALID_HEADER, et, "GET", 3, false),
                "invalid header not listed");
        eq("FAILED retry up=502 client=0 tries=2",
                dec(Attempt.Reply.INVALID_HEADER, pol(0, "invalid_header"), "GET", 3, false), "invalid header");
        eq("FAILED back retry up=502 client=0 tries=1", dec(Attempt.Reply.STALE_CACHED, et, "GET", 1, false),
                "stale, tries 1");
        eq("FAILED back retry up=502 client=0 tries=1", dec(Attempt.Reply.STALE_CACHED, et, "GET", 1, true),
                "stale, single");
        eq("FAILED back stop up=502 client=502 tries=3", dec(Attempt.Reply.STALE_CACHED, et, "POST", 3, false),
                "stale POST");
        eq("FAILED stop up=504 client=504 tries=0",
                dec(new Attempt.Reply(Attempt.Kind.TIMEOUT, 0, true, true), et, "GET", 1, false),
                "timeout on a cached connection is not given back");
        Attempt.Policy all = pol(0, "error", "timeout", "http_500", "http_502", "http_503", "http_504", "http_429",
                "http_403", "http_404");
        for (int s : List.of(500, 502, 503, 504, 429)) {
            eq("FAILED retry up=" + s + " client=0 tries=1", dec(Attempt.Reply.response(s), all, "GET", 2, false),
                    "listed " + s);
            eq("OK stop up=" + s + " client=" + s + " tries=0", dec(Attempt.Reply.response(s), all, "GET", 1, false),
                    "last attempt's " + s);
        }
        for (int s : List.of(403, 404)) {
            eq("NEXT retry up=" + s + " client=0 tries=1", dec(Attempt.Reply.response(s), all, "GET", 2, false),
                    "listed " + s);
            eq("OK stop up=" + s + " client=" + s + " tries=0", dec(Attempt.Reply.response(s), all, "GET", 1, false),
                    "last attempt's " + s);
        }
        for (int s : List.of(200, 301, 400, 501)) {
            eq("OK stop up=" + s + " client=" + s + " tries=2", dec(Attempt.Reply.response(s), all, "GET", 3, false),
                    "status " + s);
        }
        eq("OK stop up=502 client=502 tries=2", dec(Attempt.Reply.response(502), pol(0, "http_502"), "POST", 3, false),
                "502 POST");
        eq("FAILED retry up=502 client=0 tries=2",
                dec(Attempt.Reply.response(502), pol(0, "http_502", "non_idempotent"), "POST", 3, false),
                "502 POST non_idempotent");
        checks++;
        try {
            pol(0, "http_501");
            failures++;
            System.out.println("FAIL policy accepted http_501");
        } catch (IllegalArgumentException expected) {
            // not a proxy_next_upstream word
        }
    }

    // ---- §5.1 on whole requests: attempts, outcome, status, $upstream_status, what the peers keep ----

    private static String run(Worker w, Map<String, String> answers, Attempt.Policy p, String method, long now,
                              String key) {
        Worker.Outcome o = w.run(b(key), now, p, method, peer -> answers.get(peer.address()));
        List<String> as = new ArrayList<>();
        for (Peer peer : o.attempts()) {
            as.add(peer.address());
        }
        return String.join(" ", as) + " " + o.outcomeName() + " " + o.httpStatus() + " " + o.upstreamStatuses();
    }

    private static String run(Worker w, Map<String, String> answers, Attempt.Policy p) {
        return run(w, answers, p, "GET", Replay.NOW, "k0");
    }

    private static void failureRequests() {
        List<Peer> two = List.of(new Peer(b("127.0.0.1:9001"), "127.0.0.1:9001", 1, 1, 10, 0, false, false),
                new Peer(b("127.0.0.1:9002"), "127.0.0.1:9002", 1, 1, 10, 0, false, false));
        Upstream up = new Upstream(Upstream.Method.CONSISTENT, two, List.of(), Rules.LATEST);
        String a = new String(up.ring().owner(b("k0")), StandardCharsets.UTF_8);
        String bb = a.equals("127.0.0.1:9001") ? "127.0.0.1:9002" : "127.0.0.1:9001";
        Attempt.Policy p502 = pol(0, "error", "timeout", "http_502");
        Map<String, String> none = Map.of();

        Worker w = new Worker(up);
        eq(a + " " + bb + " answered 200 [502, 200]", run(w, Map.of(a, "http_502"), p502), "listed 502 moves on");
        eq(bb + " answered 200 [200]", run(w, none, p502), "the 502 peer was failed");

        w = new Worker(up);
        eq(a + " answered 502 [502]", run(w, Map.of(a, "http_502"), pol(1, "error", "timeout", "http_502")),
                "tries 1: the 502 is passed on");
        eq(a + " answered 200 [200]", run(w, none, p502), "a passed-on 502 is a success");
        eq(a + " answered 503 [503]", run(w, Map.of(a, "http_503"), p502), "503 not listed");
        eq(a + " answered 200 [200]", run(w, none, p502), "a 503 not listed is a success");

        w = new Worker(up);
        eq(a + " " + bb + " answered 200 [404, 200]", run(w, Map.of(a, "http_404"), pol(0, "error", "http_404")),
                "404 listed");
        eq(a + " answered 200 [200]", run(w, none, p502), "404 is NEXT, not failed");

        eq(a + " answered 502 [502]", run(new Worker(up), Map.of(a, "http_502"), p502, "POST", Replay.NOW, "k0"),
                "POST 502 without non_idempotent");
        eq(a + " " + bb + " answered 200 [502, 200]", run(new Worker(up), Map.of(a, "http_502"),
                pol(0, "error", "timeout", "http_502", "non_idempotent"), "POST", Replay.NOW, "k0"),
                "POST 502 with non_idempotent");
        eq(a + " " + bb + " answered 200 [502, 200]", run(new Worker(up), Map.of(a, "refused"), p502, "POST",
                Replay.NOW, "k0"), "POST refused: not sent");
        eq(a + " failed 504 [504]", run(new Worker(up), Map.of(a, "timeout"), p502, "POST", Replay.NOW, "k0"),
                "POST timeout");
        eq(a + " " + bb + " answered 200 [504, 200]", run(new Worker(up), Map.of(a, "timeout"), p502), "timeout");
        eq(a + " failed 504 [504]", run(new Worker(up), Map.of(a, "timeout"), pol(0, "error")), "timeout not listed");
        eq(a + " failed 502 [502]", run(new Worker(up), Map.of(a, "invalid_header"), p502), "invalid header");
        eq(a + " " + bb + " failed 504 [502, 504]", run(new Worker(up), Map.of(a, "invalid_header", bb, "timeout"),
                pol(0, "invalid_header")), "invalid header then timeout");
        w = new Worker(up);
        eq(a + " failed 502 [502]", run(w, Map.of(a, "refused"), pol(0, "off")), "off");
        eq(bb + " answered 200 [200]", run(w, none, p502), "off: failed all the same");

        // stale keepalive, two peers: given back even with tries 1, the stale peer is failed
        w = new Worker(up);
        Attempt.Policy e1 = pol(1, "error");
        Map<String, String> stale = Map.of(a, "stale_keepalive");
        eq(a + " answered 200 [200]", run(w, stale, e1), "stale 1 (fresh worker)");
        eq(a + " " + bb + " answered 200 [502, 200]", run(w, stale, e1), "stale 2 (cached)");
        eq(bb + " answered 200 [200]", run(w, stale, e1), "stale 3 (failed)");

        // stale keepalive, a single peer gets a second attempt
        Upstream one = new Upstream(Upstream.Method.CONSISTENT,
                List.of(new Peer(b("127.0.0.1:9001"), "s", 1, 1, 10, 0, false, false)), List.of(), Rules.LATEST);
        w = new Worker(one);
        Map<String, String> st = Map.of("s", "stale_keepalive");
        Attempt.Policy et = pol(0, "error", "timeout");
        eq("s answered 200 [200]", run(w, st, et), "single stale 1");
        eq("s s answered 200 [502, 200]", run(w, st, et), "single stale 2");
        eq("s failed 502 [502]", run(w, st, et, "POST", Replay.NOW, "k0"), "single stale POST");
        eq("s answered 200 [200]", run(w, st, et, "POST", Replay.NOW, "k0"), "single stale POST again");

        // the clock: a failed peer is skipped while now - checked <= fail_timeout
        w = new Worker(up);
        eq(a + " " + bb + " answered 200 [504, 200]", run(w, Map.of(a, "timeout"), et, "GET", 100, "k0"), "t=100");
        eq(bb + " answered 200 [200]", run(w, none, et, "GET", 110, "k0"), "t=110");
        eq(a + " answered 200 [200]", run(w, none, et, "GET", 111, "k0"), "t=111");

        // no live upstreams after discarded 5xx: the third peer failed first, then every peer answers 502
        List<Peer> three = new ArrayList<>();
        for (int port = 9001; port <= 9003; port++) {
            three.add(new Peer(b("127.0.0.1:" + port), "127.0.0.1:" + port, 1, 1, 10, 0, false, false));
        }
        Upstream up3 = new Upstream(Upstream.Method.CONSISTENT, three, List.of(), Rules.LATEST);
        String key3 = null;
        for (int i = 0; key3 == null; i++) {
            if (new String(up3.ring().owner(b("k" + i)), StandardCharsets.UTF_8).equals("127.0.0.1:9003")) {
                key3 = "k" + i;
            }
        }
        w = new Worker(up3);
        Worker.Outcome first = w.run(b(key3), Replay.NOW, p502, "GET",
                peer -> peer.address().equals("127.0.0.1:9003") ? "refused" : null);
        eq("127.0.0.1:9003 answered [502, 200]", first.attempts().get(0).address() + " " + first.outcomeName() + " "
                + first.upstreamStatuses(), "third refuses");
        Worker.Outcome o = w.run(b("k0"), Replay.NOW, p502, "GET", peer -> "http_502");
        eq("2 noLiveUpstreams 502 [502, 502, 502]", o.attempts().size() + " " + o.outcomeName() + " " + o.httpStatus()
                + " " + o.upstreamStatuses(), "no live upstreams after discarded 502s");
    }

    private static void shimProtocol2() {
        String peers = "[{\"server\":\"127.0.0.1:9001\",\"address\":\"127.0.0.1:9001\",\"weight\":1,\"maxFails\":1,"
                + "\"failTimeout\":10,\"refuses\":false%s},{\"server\":\"127.0.0.1:9002\",\"address\":\"127.0.0.1:9002\","
                + "\"weight\":1,\"maxFails\":1,\"failTimeout\":10,\"refuses\":false}]";
        String up = "{\"op\":\"upstream\",\"protocol\":%d,\"name\":\"parity\",\"method\":\"consistent\","
                + "\"version\":\"1.30.6\",\"now\":1000000000%s,\"peers\":" + peers + "}";
        String pol = ",\"policy\":{\"nextUpstream\":[\"error\",\"timeout\",\"http_502\"],\"tries\":0}";
        String a502 = ",\"answer\":\"http_502\"";
        Ring ring = new Ring(List.of(b("127.0.0.1:9001"), b("127.0.0.1:9002")), List.of(1, 1));
        String key = null;
        for (int i = 0; key == null; i++) {
            if (Arrays.equals(ring.owner(b("k" + i)), b("127.0.0.1:9001"))) {
                key = "k" + i;
            }
        }
        String hex = java.util.HexFormat.of().formatHex(b(key));
        Shim shim = new Shim();
        eq("{\"ok\":true}", shim.answer(Json.parse(String.format(up, 2, pol, a502))), "shim v2 upstream");
        eq("{\"attempts\":[\"127.0.0.1:9001\",\"127.0.0.1:9002\"],\"outcome\":\"answered\",\"status\":200,"
                + "\"upstreamStatuses\":[\"502\",\"200\"]}",
                shim.answer(Json.parse("{\"op\":\"request\",\"keyHex\":\"" + hex + "\",\"method\":\"GET\",\"now\":1000000001}")),
                "shim v2 GET");
        shim.answer(Json.parse("{\"op\":\"reset\"}"));
        eq("{\"attempts\":[\"127.0.0.1:9001\"],\"outcome\":\"answered\",\"status\":502,\"upstreamStatuses\":[\"502\"]}",
                shim.answer(Json.parse("{\"op\":\"request\",\"keyHex\":\"" + hex + "\",\"method\":\"POST\"}")),
                "shim v2 POST");
        eq(true, shim.answer(Json.parse(String.format(up, 2, pol, ",\"answer\":\"http_418\""))).startsWith("{\"unsupported\""),
                "shim v2 unknown answer");
        eq(true, shim.answer(Json.parse(String.format(up, 3, pol, ""))).startsWith("{\"unsupported\""), "shim protocol 3");
        eq(true, shim.answer(Json.parse(String.format(up, 2, "", ""))).startsWith("{\"error\""), "shim v2 without policy");
        eq(true, shim.answer(Json.parse(String.format(up, 1, "", a502))).startsWith("{\"unsupported\""), "shim v1 with answer");
        eq("{\"ok\":true}", shim.answer(Json.parse(String.format(up, 1, "", ""))), "shim v1 upstream");
        eq("{\"attempts\":[\"127.0.0.1:9001\"],\"outcome\":\"answered\"}",
                shim.answer(Json.parse("{\"op\":\"request\",\"keyHex\":\"" + hex + "\"}")), "shim v1 request");
    }

    private static String splitShow(String s) {
        byte[][] hp = Ring.split(b(s));
        return new String(hp[0], StandardCharsets.UTF_8) + "|" + new String(hp[1], StandardCharsets.UTF_8);
    }
}
