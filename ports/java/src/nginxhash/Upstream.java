package nginxhash;

import java.util.ArrayList;
import java.util.List;

/** An upstream as a fresh nginx worker sees it: the method, primary and backup lists, and the ring (consistent). */
public final class Upstream {
    public enum Method { CONSISTENT, PLAIN }

    final Method method;
    final List<List<Peer>> lists; // 0: primary, 1: backup
    final Rules rules;
    final Ring ring;

    public Upstream(Method method, List<Peer> primary, List<Peer> backup, Rules rules) {
        if (primary.isEmpty()) {
            throw new IllegalArgumentException("an upstream needs at least one primary peer");
        }
        this.method = method;
        this.lists = List.of(List.copyOf(primary), List.copyOf(backup));
        this.rules = rules;
        if (method == Method.CONSISTENT) {
            List<byte[]> servers = new ArrayList<>();
            List<Integer> weights = new ArrayList<>();
            for (Peer p : primary) {
                servers.add(p.server());
                weights.add(p.weight());
            }
            ring = new Ring(servers, weights);
        } else {
            ring = null;
        }
    }

    /** nginx's {@code single} flag of list {@code li}: one primary address and no backups (backup is never single). */
    boolean single(int li) {
        return li == 0 && lists.get(0).size() == 1 && lists.get(1).isEmpty();
    }

    /** {@code pc.tries}: non-down addresses of both lists (all addresses before 1.19.6). */
    int budget() {
        int n = 0;
        for (List<Peer> l : lists) {
            for (Peer p : l) {
                if (!p.down() || !rules.downExcludedFromBudget()) {
                    n++;
                }
            }
        }
        return n;
    }

    public Ring ring() {
        return ring;
    }
}
