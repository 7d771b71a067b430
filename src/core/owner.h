/*
 * owner.h - who holds a lease: a worker process named so that another process can tell, on the
 * same machine, whether it is still running.
 *
 * A name is "HOST:PID:START": the host name, the process id and the process's start time in
 * clock ticks since boot (/proc/PID/stat), so that a recycled pid is not taken for the worker
 * that died.
 */
#ifndef VIDFEAT_OWNER_H
#define VIDFEAT_OWNER_H

#include <stddef.h>

#define VF_OWNER_SIZE 320

/* This process's name into buf (VF_OWNER_SIZE bytes). Any thread. */
void vfi_owner_self(char *buf, size_t size);

/* This machine's host name as the names carry it, into buf. */
void vfi_owner_host(char *buf, size_t size);

/* 1 when owner is a process of this machine that is certainly gone (no such pid, or a pid now
 * used by a process that started at another time); 0 when it runs, belongs to another machine
 * or the name cannot be read. */
int vfi_owner_gone(const char *owner);

#endif /* VIDFEAT_OWNER_H */
