package nginxhash;

import java.nio.charset.StandardCharsets;

/** The plain {@code hash $key;} rehash sequence (docs/nginx-algorithm.md §4), compatible with Cache::Memcached. */
public final class PlainHash {
    private PlainHash() {}

    /** The 15-bit hash of attempt {@code rehash}: no prefix for 0, then "1", "2", ... prepended to the key. */
    public static long hash(byte[] key, long rehash) {
        byte[] prefix = rehash > 0 ? Long.toString(rehash).getBytes(StandardCharsets.US_ASCII) : new byte[0];
        byte[] data = new byte[prefix.length + key.length];
        System.arraycopy(prefix, 0, data, 0, prefix.length);
        System.arraycopy(key, 0, data, prefix.length, key.length);
        return (Crc.crc32(data) >>> 16) & 0x7fff;
    }

    /** Index of the peer owning slot {@code acc mod sum(weights)}; each peer owns {@code weight} slots. */
    public static int slotOwner(int[] weights, long acc) {
        long total = 0;
        for (int w : weights) {
            total += w;
        }
        long w = Long.remainderUnsigned(acc, total);
        int p = 0;
        while (w >= weights[p]) {
            w -= weights[p];
            p++;
        }
        return p;
    }

    /** The peer index of the first attempt for {@code key}. */
    public static int owner(byte[] key, int[] weights) {
        return slotOwner(weights, hash(key, 0));
    }
}
