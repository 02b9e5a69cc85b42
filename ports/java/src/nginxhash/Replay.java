package nginxhash;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Replays the golden vectors (vectors/v1/*.json, recorded from real nginx) against this port.
 *
 * <p>Failure groups (those with a {@code policy}, §5.1) run each test under the group's policy with its
 * {@code requestMethod}, at {@code NOW + clock}, each peer doing what its {@code answer} says; {@code status} and
 * {@code upstreamStatuses} are compared too. A group with a policy word or peer answer this port does not know is a
 * SKIP.
 *
 * <p>Usage: {@code java -cp build nginxhash.Replay DIR_OR_FILE...}. Prints one line per failing test and a closing
 * line {@code N passed, M failed[, K skipped]}; exits 1 on any failure or unreadable file, or if no test ran.
 */
public final class Replay {
    static final long NOW = 1_000_000_000L; // one constant clock (vectors with max_fails>0 use fail_timeout 3600)

    private int passed;
    private int failed;
    private int skipped;
    private int errors;

    public static void main(String[] args) throws IOException {
        if (args.length == 0) {
            args = new String[] {"vectors/v1"};
        }
        List<Path> files = new ArrayList<>();
        for (String a : args) {
            Path p = Path.of(a);
            if (Files.isDirectory(p)) {
                try (Stream<Path> s = Files.list(p)) {
                    s.filter(f -> f.getFileName().toString().endsWith(".json"))
                            .filter(f -> !f.getFileName().toString().equals("schema.json"))
                            .sorted().forEach(files::add);
                }
            } else {
                files.add(p);
            }
        }
        Replay r = new Replay();
        for (Path f : files) {
            r.file(f);
        }
        if (r.errors > 0) {
            System.out.println(r.errors + " file(s)/group(s) could not be replayed");
        }
        System.out.println(r.passed + " passed, " + r.failed + " failed" + (r.skipped > 0 ? ", " + r.skipped + " skipped" : ""));
        if (files.isEmpty()) {
            System.err.println("no vector files found in " + String.join(" ", args));
        }
        System.exit(r.failed > 0 || r.errors > 0 || r.passed + r.failed == 0 ? 1 : 0);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object o) {
        if (!(o instanceof Map)) {
            throw new IllegalArgumentException("expected an object, got " + o);
        }
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> arr(Object o) {
        if (o == null) {
            return List.of();
        }
        if (!(o instanceof List)) {
            throw new IllegalArgumentException("expected an array, got " + o);
        }
        return (List<Object>) o;
    }

    static long num(Map<String, Object> m, String k, long dflt) {
        Object v = m.get(k);
        if (v == null) {
            return dflt;
        }
        if (v instanceof Long l) {
            return l;
        }
        throw new IllegalArgumentException(k + " is not an integer: " + v);
    }

    private static boolean bool(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v instanceof Boolean b && b;
    }

    private void file(Path path) {
        Map<String, Object> doc;
        try {
            doc = obj(Json.parse(Files.readString(path, StandardCharsets.UTF_8)));
        } catch (IOException | IllegalArgumentException e) {
            System.out.println("ERROR " + path + ": " + e.getMessage());
            errors++;
            return;
        }
        String base = path.getFileName().toString();
        List<Object> groups = arr(doc.get("testGroups"));
        int count = 0;
        for (Object g : groups) {
            count += arr(obj(g).get("tests")).size();
        }
        if (doc.get("numberOfTests") instanceof Long n && n != count) {
            System.out.println("WARN " + base + ": numberOfTests is " + n + " but the file holds " + count + " tests");
        }
        for (int gi = 0; gi < groups.size(); gi++) {
            Map<String, Object> g = obj(groups.get(gi));
            String name = base + ":" + (g.get("name") instanceof String s ? s : "#" + gi);
            List<Rules> rules;
            try {
                rules = groupRules(g);
                Object m = g.get("method");
                if (!"consistent".equals(m) && !"plain".equals(m)) {
                    throw new IllegalArgumentException("unknown method " + m);
                }
                // This port sorts ring points stably (glibc's rule); groups recorded only on musl need musl's.
                if (g.get("libc") instanceof List<?> libc && !libc.contains("glibc")) {
                    throw new IllegalArgumentException(
                            "needs musl's tie rule (docs/nginx-algorithm.md §3.2); this port models glibc");
                }
                // failure groups (§5.1): a policy word or a peer answer this port does not know
                policy(g);
                for (Object p : arr(g.get("peers"))) {
                    answer(obj(p));
                }
            } catch (IllegalArgumentException e) {
                System.out.println("SKIP " + name + ": " + e.getMessage());
                skipped += arr(g.get("tests")).size();
                continue;
            }
            try {
                group(name, g, rules);
            } catch (RuntimeException e) {
                System.out.println("ERROR " + name + ": malformed group: " + e);
                errors++;
            }
        }
    }

    /** One rule set per distinct behaviour among the group's nginx versions; each must reproduce the vectors. */
    private static List<Rules> groupRules(Map<String, Object> g) {
        List<Rules> out = new ArrayList<>();
        Object src = g.get("source");
        List<Object> versions = src instanceof Map ? arr(obj(src).get("versions")) : List.of();
        for (Object v : versions) {
            Rules r = Rules.forVersion(String.valueOf(v));
            if (!out.contains(r)) {
                out.add(r);
            }
        }
        if (out.isEmpty()) {
            out.add(Rules.LATEST);
        }
        return out;
    }

    /** A failure group's {@code policy} (proxy_next_upstream words and tries); nginx's default elsewhere. */
    static Attempt.Policy policy(Map<String, Object> g) {
        if (g.get("policy") == null) {
            return Attempt.Policy.DEFAULT;
        }
        Map<String, Object> pol = obj(g.get("policy"));
        List<String> words = new ArrayList<>();
        for (Object w : arr(pol.get("nextUpstream"))) {
            if (!(w instanceof String s)) {
                throw new IllegalArgumentException("policy.nextUpstream holds a non-string " + w);
            }
            words.add(s);
        }
        if (words.isEmpty()) {
            throw new IllegalArgumentException("policy.nextUpstream is empty");
        }
        return Attempt.Policy.of(words, (int) num(pol, "tries", 0));
    }

    /** A peer's {@code answer} (failure groups): absent is 200 OK; one this port does not know is an error. */
    static String answer(Map<String, Object> p) {
        Object a = p.get("answer");
        if (a == null) {
            return null;
        }
        if (!(a instanceof String s) || s.equals(Attempt.REFUSED) || !Attempt.ANSWERS.contains(s)) {
            throw new IllegalArgumentException("peer answer " + a + " is not modelled");
        }
        return s;
    }

    static Upstream upstream(Map<String, Object> g, Rules rules) {
        List<Peer> primary = new ArrayList<>();
        List<Peer> backup = new ArrayList<>();
        for (Object o : arr(g.get("peers"))) {
            Map<String, Object> p = obj(o);
            Peer peer = new Peer(((String) p.get("server")).getBytes(StandardCharsets.UTF_8), (String) p.get("address"),
                    (int) num(p, "weight", 1), (int) num(p, "maxFails", 1), num(p, "failTimeout", 10),
                    (int) num(p, "maxConns", 0), bool(p, "down"), bool(p, "refuses"), answer(p));
            (bool(p, "backup") ? backup : primary).add(peer);
        }
        Upstream.Method m = "consistent".equals(g.get("method")) ? Upstream.Method.CONSISTENT : Upstream.Method.PLAIN;
        return new Upstream(m, primary, backup, rules);
    }

    static byte[] key(Map<String, Object> t) {
        if (t.get("keyHex") instanceof String h) {
            return HexFormat.of().parseHex(h);
        }
        if (t.get("key") instanceof String k) {
            return k.getBytes(StandardCharsets.UTF_8);
        }
        throw new IllegalArgumentException("test has neither keyHex nor key");
    }

    private static String fmt(List<String> attempts, Object outcome) {
        return "[" + String.join(", ", attempts) + "] " + outcome;
    }

    private static String check(Map<String, Object> t, Worker.Outcome out, byte[] key) {
        List<String> got = new ArrayList<>();
        for (Peer p : out.attempts()) {
            got.add(p.address());
        }
        List<String> want = new ArrayList<>();
        for (Object a : arr(t.get("attempts"))) {
            want.add((String) a);
        }
        List<String> problems = new ArrayList<>();
        if (!got.equals(want) || !out.outcomeName().equals(t.get("outcome"))) {
            problems.add("expected " + fmt(want, t.get("outcome")) + " got " + fmt(got, out.outcomeName()));
        }
        if (t.containsKey("servers") && problems.isEmpty()) {
            List<String> gotServers = new ArrayList<>();
            for (Peer p : out.attempts()) {
                gotServers.add(new String(p.server(), StandardCharsets.UTF_8));
            }
            List<Object> wantServers = arr(t.get("servers"));
            if (!gotServers.equals(wantServers)) {
                problems.add("servers expected " + wantServers + " got " + gotServers);
            }
        }
        if (t.get("status") instanceof Long s && s != out.httpStatus()) {
            problems.add("status expected " + s + " got " + out.httpStatus());
        }
        if (t.containsKey("upstreamStatuses") && !arr(t.get("upstreamStatuses")).equals(out.upstreamStatuses())) {
            problems.add("upstreamStatuses expected " + t.get("upstreamStatuses") + " got " + out.upstreamStatuses());
        }
        if (t.get("crc32") instanceof String c && Long.parseLong(c, 16) != Crc.crc32(key)) {
            problems.add("crc32 expected " + c + " got " + String.format("%08x", Crc.crc32(key)));
        }
        return problems.isEmpty() ? null : String.join("; ", problems);
    }

    private void group(String name, Map<String, Object> g, List<Rules> rulesList) {
        List<Map<String, Object>> tests = new ArrayList<>();
        for (Object o : arr(g.get("tests"))) {
            tests.add(obj(o));
        }
        tests.sort(Comparator.comparingLong(t -> num(t, "tcId", 0)));
        boolean stateful = bool(g, "stateful");
        Attempt.Policy policy = policy(g);
        Map<Long, List<String>> failures = new LinkedHashMap<>();
        for (Rules rules : rulesList) {
            Upstream up = upstream(g, rules);
            Worker shared = new Worker(up);
            for (Map<String, Object> t : tests) {
                byte[] key = key(t);
                Worker w = stateful ? shared : new Worker(up);
                String method = t.get("requestMethod") instanceof String m ? m : "GET";
                long clock = num(t, "clock", 0);
                if (clock < 0) {
                    throw new IllegalArgumentException("negative clock " + clock);
                }
                String problem = check(t, w.run(key, NOW + clock, policy, method), key);
                if (problem != null) {
                    failures.computeIfAbsent(num(t, "tcId", 0), k -> new ArrayList<>())
                            .add(problem + (rulesList.size() == 1 ? "" : " (model " + rules + ")"));
                }
            }
        }
        for (Map<String, Object> t : tests) {
            long id = num(t, "tcId", 0);
            if (failures.containsKey(id)) {
                Object k = t.get("key") != null ? "'" + t.get("key") + "'" : "hex:" + t.get("keyHex");
                System.out.println("FAIL " + name + " tcId=" + id + " key=" + k + ": " + String.join(" | ", failures.get(id)));
            }
        }
        failed += failures.size();
        passed += tests.size() - failures.size();
    }
}
