package nginxhash;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;

/**
 * One nginx worker process serving one upstream (docs/nginx-algorithm.md §3.4, §4, §5): it keeps the
 * per-peer state nginx keeps (smooth weighted round-robin weights, failure counts, timestamps, connection
 * counts) across requests.
 */
public final class Worker {
    public static final int MAX_HASH_MISSES = 20;

    public enum Status { ANSWERED, FAILED, NO_LIVE_UPSTREAMS }

    /** The peers tried, in order, and how the request ended. */
    public record Outcome(List<Peer> attempts, Status status, boolean roundRobin) {
        public String outcomeName() {
            return switch (status) {
                case ANSWERED -> "answered";
                case FAILED -> "failed";
                case NO_LIVE_UPSTREAMS -> "noLiveUpstreams";
            };
        }

        public int httpStatus() {
            return status == Status.ANSWERED ? 200 : 502;
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

    /** One request with {@code proxy_next_upstream error}, at clock {@code now} (seconds). */
    public Outcome request(byte[] key, long now, Predicate<Peer> fails) {
        Request r = new Request();
        r.key = key;
        r.tried = new boolean[Math.max(up.lists.get(0).size(), up.lists.get(1).size())];
        r.budget = up.budget();
        if (up.ring != null && up.ring.size() > 0) {
            r.point = up.ring.locate(Crc.crc32(key));
        }
        List<Peer> attempts = new ArrayList<>();
        while (true) {
            int i = get(r, now);
            if (i < 0) {
                return new Outcome(attempts, Status.NO_LIVE_UPSTREAMS, r.roundRobin);
            }
            Peer peer = up.lists.get(r.li).get(i);
            attempts.add(peer);
            boolean failed = fails.test(peer);
            free(r, i, failed, now);
            if (!failed) {
                return new Outcome(attempts, Status.ANSWERED, r.roundRobin);
            }
            if (r.budget == 0) {
                return new Outcome(attempts, Status.FAILED, r.roundRobin);
            }
        }
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

    /** ngx_http_upstream_free_round_robin_peer after one attempt. */
    private void free(Request r, int i, boolean failed, long now) {
        Peer p = up.lists.get(r.li).get(i);
        State st = states[r.li][i];
        if (up.single(r.li)) {
            st.fails = 0;
            st.conns--;
            r.budget = 0;
            return;
        }
        if (failed) {
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
        if (r.budget > 0) {
            r.budget--;
        }
    }
}
