package nginxhash;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * This port behind the shim protocol (ports/SHIM.md, versions 1 and 2): JSON lines on stdin, one answer per line on
 * stdout.
 *
 * <pre>
 *   nginx-ketama replay-vectors --shim "ports/java/run --shim"
 *   nginx-ketama verify --backend local --shim "ports/java/run --shim"
 * </pre>
 *
 * <p>{@code upstream} builds the port's {@link Upstream} with the vector replay's own peer parsing (the message has
 * a vector group's shape) and a fresh {@link Worker}; {@code request} runs one request on it, the peers with
 * {@code refuses} failing; {@code reset} starts a fresh Worker. A version the port does not model is answered
 * {@code {"unsupported": ...}}; an unknown op or a malformed message {@code {"error": ...}}. Exits 0 at the end of
 * stdin. Protocol 2 (failure kinds, docs/nginx-algorithm.md §5.1): the upstream carries a {@code policy} and peer
 * {@code answer}s, a request its {@code method} and optional {@code now}, and the answer {@code status} and
 * {@code upstreamStatuses}.
 */
public final class Shim {
    private static final String NEEDS_2 = "{\"unsupported\":" + quote(
            "failure kinds (a policy or peer answers) need shim protocol 2, and this upstream says protocol 1") + "}";

    private Upstream upstream;
    private Worker worker;
    private long now;
    private long protocol;
    private Attempt.Policy policy;

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        Shim shim = new Shim();
        for (String line; (line = in.readLine()) != null; ) {
            String reply;
            try {
                reply = shim.answer(Json.parse(line));
            } catch (IllegalArgumentException e) {
                reply = error("not JSON: " + e.getMessage());
            }
            out.write(reply);
            out.write('\n');
            out.flush();
        }
    }

    String answer(Object message) {
        if (!(message instanceof Map)) {
            return error("a message must be a JSON object");
        }
        Map<String, Object> msg = Replay.obj(message);
        Object op = msg.get("op");
        if ("upstream".equals(op)) {
            upstream = null;
            worker = null;
            Rules rules;
            try {
                Object proto = msg.getOrDefault("protocol", 1L);
                if (!Long.valueOf(1).equals(proto) && !Long.valueOf(2).equals(proto)) {
                    return "{\"unsupported\":" + quote("protocol " + proto + " (this shim speaks 1 and 2)") + "}";
                }
                if (!(msg.get("version") instanceof String v)) {
                    return error("bad upstream: no version");
                }
                rules = Rules.forVersion(v);
            } catch (IllegalArgumentException e) {
                return "{\"unsupported\":" + quote("nginx " + msg.get("version") + ": " + e.getMessage()) + "}";
            }
            try {
                Object m = msg.get("method");
                if (!"consistent".equals(m) && !"plain".equals(m)) {
                    throw new IllegalArgumentException("unknown method " + m);
                }
                if (!(msg.get("peers") instanceof List<?> peers)) {
                    throw new IllegalArgumentException("no peers");
                }
                long proto = (Long) msg.getOrDefault("protocol", 1L);
                for (Object p : peers) {
                    Map<String, Object> peer = Replay.obj(p);
                    if (!(peer.get("server") instanceof String) || !(peer.get("address") instanceof String)) {
                        throw new IllegalArgumentException("a peer without server or address: " + p);
                    }
                    if (peer.get("answer") != null) {
                        if (proto == 1) {
                            return NEEDS_2;
                        }
                        try {
                            Replay.answer(peer);
                        } catch (IllegalArgumentException e) {
                            return "{\"unsupported\":" + quote(e.getMessage()) + "}";
                        }
                    }
                }
                if (proto == 1 && msg.get("policy") != null) {
                    return NEEDS_2;
                }
                if (proto == 2 && msg.get("policy") == null) {
                    throw new IllegalArgumentException("a protocol-2 upstream without policy");
                }
                Attempt.Policy pol = Replay.policy(msg);
                long clock = Replay.num(msg, "now", Replay.NOW);
                Upstream up = Replay.upstream(msg, rules);
                upstream = up;
                now = clock;
                protocol = proto;
                policy = pol;
                worker = new Worker(up);
            } catch (RuntimeException e) {
                return error("bad upstream: " + e);
            }
            return "{\"ok\":true}";
        }
        if ("request".equals(op)) {
            if (worker == null) {
                return error("request before a (supported) upstream");
            }
            if (!(msg.get("keyHex") instanceof String hex) || !hex.matches("([0-9a-fA-F]{2})*")) {
                return error("bad keyHex " + msg.get("keyHex"));
            }
            byte[] key = HexFormat.of().parseHex(hex);
            Worker.Outcome out;
            if (protocol == 1) {
                out = worker.request(key, now);
            } else {
                Object method = msg.getOrDefault("method", "GET");
                if (!(method instanceof String m) || m.isEmpty()) {
                    return error("bad method " + method);
                }
                long at;
                try {
                    at = Replay.num(msg, "now", now);
                } catch (IllegalArgumentException e) {
                    return error(e.getMessage());
                }
                out = worker.run(key, at, policy, m);
            }
            List<String> attempts = new ArrayList<>();
            for (Peer p : out.attempts()) {
                attempts.add(quote(p.address()));
            }
            String head = "{\"attempts\":[" + String.join(",", attempts) + "],\"outcome\":" + quote(out.outcomeName());
            if (protocol == 1) {
                return head + "}";
            }
            List<String> statuses = new ArrayList<>();
            for (String s : out.upstreamStatuses()) {
                statuses.add(quote(s));
            }
            return head + ",\"status\":" + out.httpStatus() + ",\"upstreamStatuses\":[" + String.join(",", statuses)
                    + "]}";
        }
        if ("reset".equals(op)) {
            if (upstream == null) {
                return error("reset before a (supported) upstream");
            }
            worker = new Worker(upstream);
            return "{\"ok\":true}";
        }
        return error("unknown op " + (op instanceof String s ? quote(s) : String.valueOf(op)));
    }

    private static String error(String what) {
        return "{\"error\":" + quote(what) + "}";
    }

    /** A JSON string literal. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
