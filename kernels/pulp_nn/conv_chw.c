/*
 * pnn_conv2d_chw (tessera/pulp_nn.h): conv.c's kernel storing its output
 * tile channel-major, compiled as its own object (see conv.c).
 */
#define CV_CHW 1
#include "conv.c"
