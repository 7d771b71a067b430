/*
 * clock.h - the monotonic clock the library times its stages and watchdogs with, and the wall
 * clock's time as the stores record it.
 */
#ifndef VIDFEAT_CLOCK_H
#define VIDFEAT_CLOCK_H

#include <stddef.h>

/* Seconds on CLOCK_MONOTONIC (an arbitrary origin; only differences mean anything). Any thread. */
double vfi_now_s(void);

/* The current UTC time as ISO 8601 ("2026-11-23T21:53:44Z", 21 bytes with the NUL) into buf.
 * Any thread. */
void vfi_now_iso(char *buf, size_t size);

/* Seconds since the Unix epoch on the wall clock (CLOCK_REALTIME), as the SQLite store times
 * leases with. Any thread. */
double vfi_epoch_s(void);

#endif /* VIDFEAT_CLOCK_H */
