package nginxhash;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * One nginx worker process serving one upstream (docs/nginx-algorithm.md §3.4, §4, §5): it keeps the
 * per-peer state nginx keeps (smooth weighted round-robin weights, failure counts, timestamps, connection
 * counts) across requests, and the cached keepalive connection per address. {@link #run} judges every attempt by
 * §5.1 ({@link Attempt#decide}).
 */
public final class Worker {
    public static final int MAX_HASH_MISSES = 20;

    public enum Status { ANSWERED, FAILED, NO_LIVE_UPSTREAMS }

    /**
     * The peers tried, in order, how the request ended, the status the client got and {@code $upstream_status}
     * split on ", ".
     */
    public record Outcome(List<Peer> attempts, Status status, boolean roundRobin, int httpStatus,
                          List<String> upstreamStatuses) {
        public String outcomeName() {
            return switch (status) {
                case ANSWERED -> "answered";
                case FAILED -> "failed";
                case NO_LIVE_UPSTREAMS -> "noLiveUpstreams";
            };
        }
    }

    private static final class State {
        long currentWeight;
        long effectiveWeight;
        long fails;
        long accessed;
        long checked;
        long conns;
    }

    private static final class Request {
        byte[] key;
        int li; // current list: 0 primary, 1 backup
        boolean[] tried;
        long point; // consistent: ring index, not advanced after a success
        long acc; // plain: cumulative hash (u32)
        long rehash;
        int misses; // hp->tries
        int budget; // pc->tries
        boolean roundRobin;
    }

    private interface Eligible {
        boolean test(int index, Peer peer, State st);
    }

    private final Upstream up;
    private final State[][] states;
    /**
     * Keepalive (§5.1): per address, whether this worker holds a cached connection to it. Only stale_keepalive peers
     * are tracked: a cached connection to any other peer answers as a new one would.
     */
    private final Map<String, Boolean> cached = new HashMap<>();

    public Worker(Upstream up) {
        this.up = up;
        states = new State[2][];
        for (int li = 0; li < 2; li++) {
            List<Peer> l = up.lists.get(li);
            states[li] = new State[l.size()];
            for (int k = 0; k < l.size(); k++) {
                states[li][k] = new State();
                states[li][k].effectiveWeight = l.get(k).weight();
            }
        }
    }

    /**
     * One request with {@code proxy_next_upstream error}, at clock {@code now} (seconds): the peers for which
     * {@code fails} holds refuse the connection, the others answer 200.
     */
    public Outcome request(byte[] key, long now, Predicate<Peer> fails) {
        return run(key, now, Attempt.Policy.DEFAULT, "GET", p -> fails.test(p) ? Attempt.REFUSED : null);
    }

    /**
     * One request under {@code policy} (§5.1) with the request {@code method}, at clock {@code now}; {@code answer}
     * names what each peer does ({@link Attempt#ANSWERS}, null for 200 OK). Every attempt is judged by
     * {@link Attempt#decide}.
     */
    public Outcome run(byte[] key, long now, Attempt.Policy policy, String method, Function<Peer, String> answer) {
        Request r = new Request();
        r.key = key;
        r.tried = new boolean[Math.max(up.lists.get(0).size(), up.lists.get(1).size())];
        r.budget = up.budget();
        if (policy.tries() > 0 && policy.tries() < r.budget) {
            r.budget = policy.tries(); // proxy_next_upstream_tries, applied once at the start (§5)
        }
        if (up.ring != null && up.ring.size() > 0) {
            r.point = up.ring.locate(Crc.crc32(key));
        }
        List<Peer> attempts = new ArrayList<>();
        List<String> statuses = new ArrayList<>();
        while (true) {
            int i = get(r, now);
            if (i < 0) {
                statuses.add("502"); // the peerless last attempt of "no live upstreams"
                return new Outcome(attempts, Status.NO_LIVE_UPSTREAMS, r.roundRobin, 502, statuses);
            }
            Peer peer = up.lists.get(r.li).get(i);
            attempts.add(peer);
            Attempt.Reply reply = reply(peer, answer.apply(peer));
            Attempt.Decision d = Attempt.decide(reply, policy, method, r.budget, up.single(r.li));
            free(r, i, d.state(), now);
            r.budget = d.tries();
            statuses.add(String.valueOf(d.upstreamStatus()));
            if (!d.retry()) {
                Status end = reply.kind() == Attempt.Kind.RESPONSE ? Status.ANSWERED : Status.FAILED;
                return new Outcome(attempts, end, r.roundRobin, d.clientStatus(), statuses);
            }
        }
    }

    /** One request where every peer does what its own fields say (refuses, answer), under a policy. */
    public Outcome run(byte[] key, long now, Attempt.Policy policy, String method) {
        return run(key, now, policy, method, Peer::ownAnswer);
    }

    /** What an attempt at {@code peer} meets; a stale_keepalive peer depends on the worker's cached connection. */
    private Attempt.Reply reply(Peer peer, String answer) {
        if (Attempt.STALE_KEEPALIVE.equals(answer)) {
            if (cached.getOrDefault(peer.address(), false)) {
                cached.put(peer.address(), false);
                return Attempt.Reply.STALE_CACHED;
            }
            cached.put(peer.address(), true);
            return Attempt.Reply.response(200);
        }
        return Attempt.replyOf(answer);
    }

    /** Same, where a peer fails exactly when its {@code refuses} flag is set. */
    public Outcome request(byte[] key, long now) {
        return request(key, now, Peer::refuses);
    }

    /** The hash module's get(); -1 is NGX_BUSY. */
    private int get(Request r, long now) {
        boolean bypass;
        if (up.method == Upstream.Method.CONSISTENT || !up.rules.plainGuardOnNumber()) {
            bypass = up.single(r.li);
        } else {
            bypass = up.lists.get(r.li).size() < 2;
        }
        boolean empty = up.rules.emptyKeyRoundRobin() && r.key.length == 0;
        if (r.misses > MAX_HASH_MISSES || bypass || empty) {
            return roundRobin(r, now);
        }
        int i;
        if (up.method == Upstream.Method.CONSISTENT) {
            if (up.lists.get(r.li).isEmpty() || up.ring.size() == 0) {
                return -1;
            }
            i = consistent(r, now);
        } else {
            i = plain(r, now);
        }
        if (i < 0) {
            return roundRobin(r, now);
        }
        select(r, i, now);
        return i;
    }

    private static boolean atMaxConns(Peer p, State st) {
        return p.maxConns() > 0 && st.conns >= p.maxConns();
    }

    private static boolean usable(Peer p, State st, long now) {
        if (p.down()) {
            return false;
        }
        if (p.maxFails() > 0 && st.fails >= p.maxFails() && now - st.checked <= p.failTimeout()) {
            return false;
        }
        return !atMaxConns(p, st);
    }

    /** One smooth weighted round-robin pass over the eligible peers of list {@code li}; -1 if none. */
    private int smoothWrr(int li, Eligible eligible) {
        List<Peer> peers = up.lists.get(li);
        State[] st = states[li];
        int best = -1;
        long total = 0;
        for (int k = 0; k < peers.size(); k++) {
            Peer p = peers.get(k);
            if (!eligible.test(k, p, st[k])) {
                continue;
            }
            st[k].currentWeight += st[k].effectiveWeight;
            total += st[k].effectiveWeight;
            if (st[k].effectiveWeight < p.weight()) {
                st[k].effectiveWeight++;
            }
            if (best < 0 || st[k].currentWeight > st[best].currentWeight) {
                best = k;
            }
        }
        if (best >= 0) {
            st[best].currentWeight -= total;
        }
        return best;
    }

    private int consistent(Request r, long now) {
        while (true) {
            byte[] wanted = up.ring.serverAt(r.point);
            int chosen = smoothWrr(r.li,
                    (k, p, st) -> !r.tried[k] && usable(p, st, now) && Arrays.equals(p.server(), wanted));
            if (chosen >= 0) {
                return chosen;
            }
            r.point++;
            r.misses++;
            if (r.misses > MAX_HASH_MISSES) {
                return -1;
            }
        }
    }

    private int plain(Request r, long now) {
        List<Peer> peers = up.lists.get(r.li);
        int[] weights = new int[peers.size()];
        for (int k = 0; k < weights.length; k++) {
            weights[k] = peers.get(k).weight();
        }
        while (true) {
            r.acc = (r.acc + PlainHash.hash(r.key, r.rehash)) & 0xffffffffL;
            r.rehash++;
            int p = PlainHash.slotOwner(weights, r.acc);
            if (!r.tried[p] && usable(peers.get(p), states[r.li][p], now)) {
                return p;
            }
            r.misses++;
            if (r.misses > MAX_HASH_MISSES) {
                return -1;
            }
        }
    }

    private void select(Request r, int i, long now) {
        Peer p = up.lists.get(r.li).get(i);
        State st = states[r.li][i];
        st.conns++;
        if (now - st.checked > p.failTimeout()) {
            st.checked = now;
        }
        r.tried[i] = true;
    }

    /** ngx_http_upstream_get_round_robin_peer, with the sticky switch to the backup list; -1 is BUSY. */
    private int roundRobin(Request r, long now) {
        r.roundRobin = true;
        if (up.single(r.li)) {
            Peer p = up.lists.get(r.li).get(0);
            State st = states[r.li][0];
            if (!p.down() && !atMaxConns(p, st)) {
                st.conns++;
                return 0;
            }
        } else {
            int chosen = smoothWrr(r.li, (k, p, st) -> !r.tried[k] && usable(p, st, now));
            if (chosen >= 0) {
                select(r, chosen, now);
                return chosen;
            }
        }
        if (r.li == 0 && !up.lists.get(1).isEmpty()) {
            r.li = 1;
            Arrays.fill(r.tried, false);
            return roundRobin(r, now);
        }
        return -1;
    }

    /** ngx_http_upstream_free_round_robin_peer after one attempt (§5); the budget is decide()'s. */
    private void free(Request r, int i, Attempt.Freed state, long now) {
        Peer p = up.lists.get(r.li).get(i);
        State st = states[r.li][i];
        if (up.single(r.li)) {
            st.fails = 0;
            st.conns--;
            return;
        }
        if (state == Attempt.Freed.FAILED) {
            st.fails++;
            st.accessed = now;
            st.checked = now;
            if (p.maxFails() > 0) {
                st.effectiveWeight = Math.max(0, st.effectiveWeight - p.weight() / p.maxFails());
            }
        } else if (st.accessed < st.checked) {
            st.fails = 0;
        }
        st.conns--;
    }
}
