package nginxhash;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * The ketama ring of {@code hash $key consistent;} (docs/nginx-algorithm.md §3.1-3.3), built from the primary
 * list only.
 */
public final class Ring {
    public static final int POINTS_PER_WEIGHT = 160;

    private final long[] hashes; // ascending, unique, unsigned 32-bit values
    private final byte[][] servers; // the server string owning each point

    /** Builds the ring from the primary peers' (server string, weight), in list order, down peers included. */
    public Ring(List<byte[]> serverList, List<Integer> weights) {
        List<Long> h = new ArrayList<>();
        List<byte[]> owner = new ArrayList<>();
        for (int k = 0; k < serverList.size(); k++) {
            byte[] s = serverList.get(k);
            for (long p : serverPoints(s, weights.get(k))) {
                h.add(p);
                owner.add(s);
            }
        }
        Integer[] order = new Integer[h.size()];
        for (int k = 0; k < order.length; k++) {
            order[k] = k;
        }
        // Arrays.sort on objects is a stable merge sort: on equal hashes the earliest point stays first (algorithm §3.2).
        Arrays.sort(order, Comparator.comparingLong(h::get));
        long[] hs = new long[order.length];
        byte[][] ss = new byte[order.length][];
        int n = 0;
        for (Integer k : order) {
            long v = h.get(k);
            if (n > 0 && hs[n - 1] == v) {
                continue; // keep the first point of every run of equal hashes
            }
            hs[n] = v;
            ss[n] = owner.get(k);
            n++;
        }
        hashes = Arrays.copyOf(hs, n);
        servers = Arrays.copyOf(ss, n);
    }

    /** Splits a server string into the host and port bytes nginx hashes. Returns {host, port}. */
    public static byte[][] split(byte[] s) {
        if (s.length >= 5 && new String(s, 0, 5, java.nio.charset.StandardCharsets.ISO_8859_1)
                .equalsIgnoreCase("unix:")) {
            return new byte[][] {Arrays.copyOfRange(s, 5, s.length), new byte[0]};
        }
        int j = s.length;
        while (j > 0 && s[j - 1] >= '0' && s[j - 1] <= '9') {
            j--;
        }
        if (j > 0 && s[j - 1] == ':') {
            return new byte[][] {Arrays.copyOfRange(s, 0, j - 1), Arrays.copyOfRange(s, j, s.length)};
        }
        return new byte[][] {s.clone(), new byte[0]};
    }

    /** The 160*weight point hashes of one server string, in generation order. */
    public static long[] serverPoints(byte[] server, int weight) {
        byte[][] hp = split(server);
        ByteBuffer buf = ByteBuffer.allocate(hp[0].length + 1 + hp[1].length + 4).order(ByteOrder.LITTLE_ENDIAN);
        buf.put(hp[0]).put((byte) 0).put(hp[1]);
        int tail = buf.position();
        long[] out = new long[POINTS_PER_WEIGHT * weight];
        long prev = 0;
        for (int k = 0; k < out.length; k++) {
            buf.putInt(tail, (int) prev); // previous hash, little-endian
            prev = Crc.crc32(buf.array());
            out[k] = prev;
        }
        return out;
    }

    public int size() {
        return hashes.length;
    }

    public long hashAt(int index) {
        return hashes[index];
    }

    /** First index whose hash is >= h (unsigned); {@code size()} if none. */
    public int locate(long h) {
        int lo = 0;
        int hi = hashes.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (hashes[mid] < h) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** The server owning ring index {@code index}, wrapping around. */
    public byte[] serverAt(long index) {
        return servers[(int) Long.remainderUnsigned(index, hashes.length)];
    }

    /** The server string owning {@code key} on a healthy upstream with unique names. */
    public byte[] owner(byte[] key) {
        return serverAt(locate(Crc.crc32(key)));
    }
}
