package nginxhash;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The routing rules that changed between the nginx releases this port models (1.13.6 and later;
 * docs/nginx-algorithm.md §8).
 */
public record Rules(boolean plainGuardOnNumber, boolean downExcludedFromBudget, boolean emptyKeyRoundRobin) {
    public static final Rules LATEST = new Rules(true, true, true);

    private static final Pattern VERSION = Pattern.compile("^\\s*(\\d+)\\.(\\d+)\\.(\\d+)");

    /** The rules of an nginx version string such as "1.26.3"; throws for unmodelled or unrecognised versions. */
    public static Rules forVersion(String text) {
        Matcher m = VERSION.matcher(text);
        if (!m.find()) {
            String t = text.trim().toLowerCase();
            if (t.equals("head") || t.equals("master") || t.equals("latest")) {
                return LATEST;
            }
            throw new IllegalArgumentException("unrecognised nginx version \"" + text + "\"");
        }
        long v = Long.parseLong(m.group(1)) * 1_000_000L + Long.parseLong(m.group(2)) * 1_000L
                + Long.parseLong(m.group(3));
        if (v < 1_013_006L) {
            throw new IllegalArgumentException(
                    "nginx before 1.13.6 (no 20-miss RR fallback in chash, quick recovery) is not modelled");
        }
        return new Rules(v >= 1_027_003L, v >= 1_019_006L, v >= 1_017_001L);
    }
}
