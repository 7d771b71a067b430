/*
 * owner.c - see owner.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "core/owner.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

void vfi_owner_host(char *buf, size_t size)
{
    if (gethostname(buf, size) != 0 || !buf[0])
        snprintf(buf, size, "localhost");
    buf[size - 1] = '\0';
    for (char *c = buf; *c; c++) /* the separator never appears inside a part */
        if (*c == ':')
            *c = '_';
}

/* Field 22 of /proc/PID/stat (starttime, clock ticks after boot); 0 when it cannot be read.
 * *zombie (may be NULL) is set when the process has exited and waits to be reaped. */
static unsigned long long start_ticks(long pid, int *zombie)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name (field 2) is in parentheses and may hold spaces: count after its end */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    if (zombie)
        *zombie = p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X');
    /* p is at the space before field 3 (the state); step to the one before field 22 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

void vfi_owner_self(char *buf, size_t size)
{
    char host[256];
    vfi_owner_host(host, sizeof(host));
    long pid = (long)getpid();
    snprintf(buf, size, "%s:%ld:%llu", host, pid, start_ticks(pid, NULL));
}

int vfi_owner_gone(const char *owner)
{
    char host[256];
    vfi_owner_host(host, sizeof(host));
    size_t hl = strlen(host);
    if (!owner || strncmp(owner, host, hl) || owner[hl] != ':')
        return 0;
    char *end;
    errno = 0;
    long pid = strtol(owner + hl + 1, &end, 10);
    if (errno || pid <= 0 || *end != ':')
        return 0;
    unsigned long long start = strtoull(end + 1, NULL, 10);
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    int zombie = 0;
    unsigned long long now = start_ticks(pid, &zombie);
    return zombie || (now != 0 && start != 0 && now != start);
}
