/* Limits of the kernels' random draws (declared in rng.pxd). */
#ifndef MW_RNG_H
#define MW_RNG_H

/* rng_below draws below 2**32: no catalogue, shuffle span or weight table may reach it. */
#define MW_MAX_ITEMS 4294967295LL

#endif
