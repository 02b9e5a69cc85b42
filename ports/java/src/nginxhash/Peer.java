package nginxhash;

/**
 * One peer: one address of one {@code server} line. {@code server} is the configured string (hashed and compared
 * byte-exact), {@code address} what {@code $upstream_addr} prints, {@code refuses} whether connecting fails (a replay
 * input, not nginx configuration).
 */
public record Peer(byte[] server, String address, int weight, int maxFails, long failTimeout, int maxConns,
                   boolean down, boolean refuses) {}
