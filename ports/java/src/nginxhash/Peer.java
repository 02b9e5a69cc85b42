package nginxhash;

/**
 * One peer: one address of one {@code server} line. {@code server} is the configured string (hashed and compared
 * byte-exact), {@code address} what {@code $upstream_addr} prints, {@code refuses} whether connecting fails and
 * {@code answer} what it answers otherwise (a failure vector's {@code answer}, {@link Attempt#ANSWERS}; null: 200 OK)
 * (replay inputs, not nginx configuration).
 */
public record Peer(byte[] server, String address, int weight, int maxFails, long failTimeout, int maxConns,
                   boolean down, boolean refuses, String answer) {
    /** A peer that answers 200 unless it refuses. */
    public Peer(byte[] server, String address, int weight, int maxFails, long failTimeout, int maxConns,
                boolean down, boolean refuses) {
        this(server, address, weight, maxFails, failTimeout, maxConns, down, refuses, null);
    }

    /** What an attempt at this peer meets by its own fields: "refused", its answer, or null (200). */
    public String ownAnswer() {
        return refuses ? Attempt.REFUSED : answer;
    }
}
