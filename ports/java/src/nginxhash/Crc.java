package nginxhash;

import java.util.zip.CRC32;

/**
 * nginx's CRC32 (docs/nginx-algorithm.md §1): the standard reflected CRC-32, as an unsigned value in a
 * {@code long}.
 */
final class Crc {
    private Crc() {}

    static long crc32(byte[] data) {
        CRC32 c = new CRC32();
        c.update(data);
        return c.getValue();
    }
}
