package nginxhash;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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

        System.out.println((checks - failures) + " passed, " + failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }

    private static String splitShow(String s) {
        byte[][] hp = Ring.split(b(s));
        return new String(hp[0], StandardCharsets.UTF_8) + "|" + new String(hp[1], StandardCharsets.UTF_8);
    }
}
