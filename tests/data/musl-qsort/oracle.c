/* The musl qsort oracle: sorts arrays of (hash, id) with the C library's qsort and prints, for each
 * array, the hashes in input order and the ids in the order qsort left them. Built with musl-gcc
 * -static by scripts/musl-qsort-golden, so the qsort is musl's; the output is
 * tests/data/musl-qsort/golden.txt, which src/ring/musl_qsort.rs must reproduce exactly.
 *
 * Elements have nginx's layout for ring points on 64-bit hosts (a 32-bit hash, then a pointer-sized
 * field: 16 bytes), and the comparator answers as nginx's ngx_http_upstream_chash_cmp_points() does:
 * by hash only, -1 / 0 / 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct point {
    uint32_t hash;
    uintptr_t id;
};

static int cmp_points(const void *one, const void *two)
{
    const struct point *a = one, *b = two;
    return a->hash < b->hash ? -1 : a->hash > b->hash ? 1 : 0;
}

static uint64_t rng = 0x853c49e6748fea9bULL;

static uint32_t next_random(void)
{
    /* xorshift64*: any fixed generator will do, the inputs are printed. */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dULL) >> 32);
}

static void run(const char *name, struct point *v, size_t n)
{
    size_t i;
    printf("case %s\nin", name);
    for (i = 0; i < n; i++) {
        v[i].id = i;
        printf(" %x", (unsigned)v[i].hash);
    }
    qsort(v, n, sizeof *v, cmp_points);
    printf("\nout");
    for (i = 0; i < n; i++) printf(" %lu", (unsigned long)v[i].id);
    printf("\n");
}

int main(void)
{
    static struct point v[4000];
    static const size_t sizes[] = {10, 33, 64, 100, 160, 321, 500, 800, 1000, 1600, 2500};
    char name[64];
    size_t n, i, s;
    unsigned bits, kind;

    /* Every array of 2..8 elements over the keys {0, 1}: every pattern of ties in small heaps. */
    for (n = 2; n <= 8; n++) {
        for (bits = 0; bits < (1u << n); bits++) {
            for (i = 0; i < n; i++) v[i].hash = (bits >> i) & 1;
            snprintf(name, sizeof name, "bits-%zu-%u", n, bits);
            run(name, v, n);
        }
    }

    /* Larger arrays: few distinct keys (many long ties), a third as many keys as elements, and ring-like
     * arrays (random 32-bit hashes with a few copies of earlier hashes, as colliding points are). */
    for (s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        n = sizes[s];
        for (kind = 0; kind < 4; kind++) {
            for (i = 0; i < n; i++) {
                switch (kind) {
                case 0: v[i].hash = next_random() % 2; break;
                case 1: v[i].hash = next_random() % 7; break;
                case 2: v[i].hash = next_random() % (n / 3); break;
                default:
                    v[i].hash = next_random();
                    if (i > 0 && next_random() % 16 == 0) v[i].hash = v[next_random() % i].hash;
                }
            }
            snprintf(name, sizeof name, "%s-%zu", kind == 0 ? "keys2" : kind == 1 ? "keys7" : kind == 2 ? "keys-third" : "ring-like", n);
            run(name, v, n);
        }
    }

    /* Already sorted, reversed, and constant inputs, as a ring's chains never are but a port might try. */
    for (i = 0; i < 1000; i++) v[i].hash = i / 3;
    run("sorted-triples-1000", v, 1000);
    for (i = 0; i < 1000; i++) v[i].hash = (999 - i) / 3;
    run("reversed-triples-1000", v, 1000);
    for (i = 0; i < 777; i++) v[i].hash = 5;
    run("constant-777", v, 777);
    return 0;
}
