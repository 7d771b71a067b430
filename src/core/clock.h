/*
 * clock.h - the monotonic clock the library times its stages and watchdogs with.
 */
#ifndef VIDFEAT_CLOCK_H
#define VIDFEAT_CLOCK_H

/* Seconds on CLOCK_MONOTONIC (an arbitrary origin; only differences mean anything). Any thread. */
double vfi_now_s(void);

#endif /* VIDFEAT_CLOCK_H */
