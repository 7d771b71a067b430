/*
 * cpus.c - how many CPUs this process may use (cpus.h).
 *
 * The cgroup comes from /proc/self/cgroup; its files are looked for where systemd and container
 * runtimes mount the hierarchies (/sys/fs/cgroup for v2, /sys/fs/cgroup/unified beside v1, and
 * /sys/fs/cgroup/cpu or /sys/fs/cgroup/cpu,cpuacct for v1's cpu controller), at the cgroup's
 * path and each parent up to the mount's root: a container sees its own cgroup as the root, and
 * a limit set on a parent (a Slurm job above its step) holds for its children.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/cpus.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The CPUs' worth of time one cgroup directory allows: v2's cpu.max ("max 100000" or "150000
 * 100000"), else v1's quota over its period; 0 when it sets none (or has no such files). */
static double dir_quota(const char *dir)
{
    char path[4200], word[32];
    long long quota = 0, period = 0;
    snprintf(path, sizeof(path), "%s/cpu.max", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        int got = fscanf(f, "%31s %lld", word, &period);
        fclose(f);
        if (got == 2 && strcmp(word, "max") && period > 0 && (quota = atoll(word)) > 0)
            return (double)quota / (double)period;
        return 0;
    }
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
    if ((f = fopen(path, "r"))) {
        if (fscanf(f, "%lld", &quota) != 1)
            quota = 0;
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
    if (quota > 0 && (f = fopen(path, "r"))) {
        if (fscanf(f, "%lld", &period) != 1)
            period = 0;
        fclose(f);
    }
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
}

/* The tightest quota from mount + path up to mount; 0 when none. */
static double tree_quota(const char *mount, const char *cgroup_path)
{
    char dir[4096];
    double best = 0;
    int n = snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(cgroup_path, "/") ? cgroup_path : "");
    if (n < 0 || (size_t)n >= sizeof(dir))
        return 0;
    size_t root = strlen(mount);
    for (;;) {
        double q = dir_quota(dir);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= root || !slash || (size_t)(slash - dir) < root)
            break;
        *slash = '\0';
    }
    return best;
}

/* Is word one of the comma-separated items of list? */
static int listed(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The cgroup quota of this process in CPUs, 0 when none is found. */
static double cgroup_quota(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char line[4096];
    double best = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *path = c2 + 1;
        double q = 0;
        if (!*controllers) { /* v2: the unified hierarchy */
            q = tree_quota(access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0
                               ? "/sys/fs/cgroup"
                               : "/sys/fs/cgroup/unified",
                           path);
        } else if (listed(controllers, "cpu")) { /* v1's cpu controller, alone or co-mounted */
            char mount[256];
            snprintf(mount, sizeof(mount), "/sys/fs/cgroup/%s", controllers);
            q = tree_quota(mount, path);
            if (q == 0)
                q = tree_quota("/sys/fs/cgroup/cpu", path);
        }
        if (q > 0 && (best == 0 || q < best))
            best = q;
    }
    fclose(f);
    return best;
}

void vfi_cpu_budget(vf_cpu_budget *b)
{
    memset(b, 0, sizeof(*b));
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    b->online = online > 0 ? (int)online : 1;
    cpu_set_t set;
    b->affinity = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : b->online;
    if (b->affinity < 1)
        b->affinity = b->online;
    b->quota = cgroup_quota();
    b->cpus = b->affinity;
    /* a quota of 1.5 CPUs keeps two threads busy three quarters of the time: rounded up */
    int by_quota = b->quota > 0 ? (int)ceil(b->quota - 1e-9) : 0;
    if (by_quota > 0 && by_quota < b->cpus)
        b->cpus = by_quota;
    if (b->cpus < 1)
        b->cpus = 1;
    if (by_quota > 0 && by_quota <= b->affinity)
        snprintf(b->limit, sizeof(b->limit), "cgroup quota %.4g CPUs", b->quota);
    else if (b->affinity < b->online)
        snprintf(b->limit, sizeof(b->limit), "affinity %d of %d CPUs", b->affinity, b->online);
    else
        snprintf(b->limit, sizeof(b->limit), "all %d CPUs", b->online);
}
