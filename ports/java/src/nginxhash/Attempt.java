package nginxhash;

import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;

/**
 * What each kind of attempt does (docs/nginx-algorithm.md §5.1): the retry policy, what one attempt met, and
 * {@link #decide}, the rule that turns them into the peer's freed state, the give-back, the retry and the statuses.
 */
public final class Attempt {
    private Attempt() {}

    /** The words {@code proxy_next_upstream} takes (§5.1). */
    public static final Set<String> WORDS = Set.of("error", "timeout", "invalid_header", "http_500", "http_502",
            "http_503", "http_504", "http_403", "http_404", "http_429", "non_idempotent", "updating", "off");
    /** The statuses {@code proxy_next_upstream} can list. */
    public static final Set<Integer> RETRIED_STATUSES = Set.of(500, 502, 503, 504, 403, 404, 429);
    /** The methods that need {@code non_idempotent} once the request was sent. */
    public static final Set<String> NON_IDEMPOTENT_METHODS = Set.of("POST", "LOCK", "PATCH");

    /**
     * {@code proxy_next_upstream} (its words in lower case; {@code off} anywhere makes it {@code off} alone) and
     * {@code proxy_next_upstream_tries} (0: no cap). {@code proxy_next_upstream_timeout} is not modelled (0, none)
     * and request bodies are buffered (the default).
     */
    public record Policy(Set<String> nextUpstream, int tries) {
        /** nginx's default: {@code error timeout}, no cap. */
        public static final Policy DEFAULT = new Policy(Set.of("error", "timeout"), 0);

        public static Policy of(Iterable<String> words, int tries) {
            Set<String> ws = new TreeSet<>();
            for (String w : words) {
                String l = w.toLowerCase(Locale.ROOT);
                if (!WORDS.contains(l)) {
                    throw new IllegalArgumentException("unknown proxy_next_upstream value " + w);
                }
                ws.add(l);
            }
            if (tries < 0) {
                throw new IllegalArgumentException("negative proxy_next_upstream_tries " + tries);
            }
            return new Policy(ws.contains("off") ? Set.of("off") : Set.copyOf(ws), tries);
        }

        public boolean lists(String condition) {
            return !nextUpstream.contains("off") && nextUpstream.contains(condition);
        }
    }

    /** The failure kinds of {@code ngx_http_upstream_next()}, and a response with a status. */
    public enum Kind { ERROR, TIMEOUT, INVALID_HEADER, RESPONSE }

    /**
     * What one attempt met: its kind (and status for a response), whether the request had been sent ("request
     * sent", §5.1) and whether it ran on a cached keepalive connection.
     */
    public record Reply(Kind kind, int status, boolean sent, boolean cached) {
        public static final Reply REFUSED = new Reply(Kind.ERROR, 0, false, false);
        public static final Reply CONNECT_TIMEOUT = new Reply(Kind.TIMEOUT, 0, false, false);
        public static final Reply CLOSED = new Reply(Kind.ERROR, 0, true, false); // closed before the header
        public static final Reply READ_TIMEOUT = new Reply(Kind.TIMEOUT, 0, true, false);
        public static final Reply INVALID_HEADER = new Reply(Kind.INVALID_HEADER, 0, true, false);
        public static final Reply STALE_CACHED = new Reply(Kind.ERROR, 0, true, true); // error on a cached connection

        public static Reply response(int status) {
            return new Reply(Kind.RESPONSE, status, true, false);
        }
    }

    /** A peer's answer as the failure vectors name it ({@code peers[i].answer}), plus "refused" for {@code refuses}. */
    public static final String REFUSED = "refused";
    public static final String STALE_KEEPALIVE = "stale_keepalive";
    public static final Set<String> ANSWERS = Set.of(REFUSED, "timeout", "invalid_header", STALE_KEEPALIVE,
            "http_500", "http_502", "http_503", "http_504", "http_403", "http_404", "http_429");

    /** The Reply of an answer ({@code null}: 200 OK); not stale_keepalive, which depends on the worker. */
    public static Reply replyOf(String answer) {
        if (answer == null) {
            return Reply.response(200);
        }
        if (!ANSWERS.contains(answer) || answer.equals(STALE_KEEPALIVE)) {
            throw new IllegalArgumentException("unknown peer answer " + answer);
        }
        return switch (answer) {
            case REFUSED -> Reply.REFUSED;
            case "timeout" -> Reply.READ_TIMEOUT;
            case "invalid_header" -> Reply.INVALID_HEADER;
            default -> Reply.response(Integer.parseInt(answer.substring(5)));
        };
    }

    /** The state a peer is freed with ({@code ngx_http_upstream_free_round_robin_peer}); OK is success (0). */
    public enum Freed { FAILED, NEXT, OK }

    /**
     * The rule's answer: the freed state, whether the attempt was given back, whether the request moves on to
     * another get(), this attempt's {@code $upstream_status}, the client's status when the request ends here (0 when
     * it is retried) and pc.tries after the free and the give-back.
     */
    public record Decision(Freed state, boolean givenBack, boolean retry, int upstreamStatus, int clientStatus,
                           int tries) {}

    /**
     * §5.1 for one attempt. {@code tries}: pc.tries before this attempt is freed; {@code single}: the current list is
     * nginx's {@code single} list (whose free sets pc.tries to 0, §5).
     */
    public static Decision decide(Reply reply, Policy policy, String method, int tries, boolean single) {
        int after = single ? 0 : Math.max(tries - 1, 0);
        boolean idempotentOk = !NON_IDEMPOTENT_METHODS.contains(method.toUpperCase(Locale.ROOT))
                || policy.lists("non_idempotent");
        if (reply.kind() == Kind.RESPONSE) {
            int s = reply.status();
            // a listed status counts only if another attempt will really happen: budget left after this one
            if (RETRIED_STATUSES.contains(s) && tries > 1 && policy.lists("http_" + s) && idempotentOk) {
                return new Decision(s == 403 || s == 404 ? Freed.NEXT : Freed.FAILED, false, true, s, 0, after);
            }
            return new Decision(Freed.OK, false, false, s, s, after);
        }
        boolean givenBack = reply.cached() && reply.kind() == Kind.ERROR; // a cached timeout is not given back
        if (givenBack) {
            after++;
        }
        int status = reply.kind() == Kind.TIMEOUT ? 504 : 502;
        String condition = switch (reply.kind()) {
            case ERROR -> "error";
            case TIMEOUT -> "timeout";
            default -> "invalid_header";
        };
        boolean retry = after > 0 && policy.lists(condition) && (!reply.sent() || idempotentOk);
        return new Decision(Freed.FAILED, givenBack, retry, status, retry ? 0 : status, after);
    }
}
