/*
 * A minimal Cortex-M application around a network tessera generated: read
 * an input (a file on the host, through semihosting: a real device would
 * take it from a sensor), run the network, print the output, its top class
 * and the instructions it took. With a second file name, compare the
 * output with it (the expected bytes tessera's export ships in test/).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/hal.h"    /* hal_init: starts the counter the layer counts read */
#include "tiny/network.h"   /* tiny_init, tiny_input, tiny_run, tiny_output, ... */

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
    static uint8_t expected[TINY_OUTPUT0_BYTES];
    const char *input = argc > 1 ? argv[1] : "input0.bin";
    const TINY_OUTPUT0_TYPE *out;
    uint32_t instructions = 0;
    unsigned i, top = 0;

    hal_init();
    tiny_init();
    if (read_file(input, tiny_input(0), TINY_INPUT0_BYTES) != 0) {
        printf("app: cannot read %d input bytes from %s\n", TINY_INPUT0_BYTES, input);
        return 1;
    }
    tiny_run();

    out = (const TINY_OUTPUT0_TYPE *)tiny_output(0);
    for (i = 1; i < TINY_OUTPUT0_BYTES / sizeof(out[0]); i++)
        if (out[i] > out[top])
            top = i;
    /* QEMU instructions (the CMSDK timer under -icount), per layer */
    for (i = 0; i < TINY_NUM_LAYERS; i++)
        instructions += (uint32_t)tiny_layer_counts[i];

    printf("app: output ");
    for (i = 0; i < TINY_OUTPUT0_BYTES; i++)
        printf("%02x", ((const uint8_t *)out)[i]);
    printf("\napp: top class %u (score %d)\n", top, (int)out[top]);
    printf("app: %lu instructions in %d layers\n", (unsigned long)instructions, TINY_NUM_LAYERS);
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
