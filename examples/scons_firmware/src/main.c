/*
 * A minimal Cortex-M application around a network tessera generated: read
 * an input (a file on the host, through semihosting: a real device would
 * take it from a sensor), run the network, print the output, its top class
 * and the instructions it took. With a second file name, compare the
 * output with it (the expected bytes tessera writes beside the network:
 * export/test/output0.bin).
 *
 * Any network: the build says which one. NET is its C prefix (tessera's
 * model name: tiny_init, tiny_run, ...), NET_UPPER the same in capitals
 * (TINY_INPUT0_BYTES, ...), NET_HEADER its header ("tiny/network.h").
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/hal.h"    /* hal_init: starts the counter the layer counts read */
#include NET_HEADER         /* <NET>_init, _input, _run, _output, the sizes */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define NET_FN(name) CAT(NET, name)           /* NET_FN(_run): tiny_run */
#define NET_DEF(name) CAT(NET_UPPER, name)    /* NET_DEF(_NUM_LAYERS): TINY_NUM_LAYERS */

static int read_file(const char *path, void *dst, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    size_t got;
    if (!f)
        return -1;
    got = fread(dst, 1, bytes, f);
    fclose(f);
    return got == bytes ? 0 : -1;
}

int main(int argc, char **argv)
{
    static uint8_t expected[NET_DEF(_OUTPUT0_BYTES)];
    const char *input = argc > 1 ? argv[1] : "input0.bin";
    const NET_DEF(_OUTPUT0_TYPE) *out;
    uint32_t instructions = 0;
    unsigned i, top = 0;

    hal_init();
    NET_FN(_init)();
    if (read_file(input, NET_FN(_input)(0), NET_DEF(_INPUT0_BYTES)) != 0) {
        printf("app: cannot read %d input bytes from %s\n", NET_DEF(_INPUT0_BYTES), input);
        return 1;
    }
    NET_FN(_run)();

    out = (const NET_DEF(_OUTPUT0_TYPE) *)NET_FN(_output)(0);
    for (i = 1; i < NET_DEF(_OUTPUT0_BYTES) / sizeof(out[0]); i++)
        if (out[i] > out[top])
            top = i;
    /* QEMU instructions (the CMSDK timer under -icount), per layer */
    for (i = 0; i < NET_DEF(_NUM_LAYERS); i++)
        instructions += (uint32_t)NET_FN(_layer_counts)[i];

    printf("app: output ");
    for (i = 0; i < NET_DEF(_OUTPUT0_BYTES); i++)
        printf("%02x", ((const uint8_t *)out)[i]);
    printf("\napp: top class %u (score %d)\n", top, (int)out[top]);
    printf("app: %lu instructions in %d layers\n", (unsigned long)instructions, NET_DEF(_NUM_LAYERS));
    if (argc > 2) {
        if (read_file(argv[2], expected, sizeof expected) != 0) {
            printf("app: cannot read %u expected bytes from %s\n", (unsigned)sizeof expected, argv[2]);
            return 1;
        }
        if (memcmp(expected, out, sizeof expected) != 0) {
            printf("app: output differs from %s\n", argv[2]);
            return 1;
        }
        printf("app: output matches %s\n", argv[2]);
    }
    return 0;
}
