/*
 * pnn_depthwise_chw (tessera/pulp_nn.h): depthwise.c's kernel on a
 * channel-major input tile, compiled as its own object (see depthwise.c).
 */
#define DW_CHW 1
#include "depthwise.c"
