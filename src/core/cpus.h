/*
 * cpus.h - how many CPUs this process may use: the CPUs its affinity mask lets it run on, and
 * the CPU time its cgroup's quota allows (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
 * cpu.cfs_period_us, the tightest of its cgroup and their parents), whichever is fewer. A
 * Kubernetes pod limited to 2 CPUs on a 64-core node, a Slurm job given 4 cores, a `taskset`:
 * each is told its own share, not the node's core count.
 */
#ifndef VIDFEAT_CPUS_H
#define VIDFEAT_CPUS_H

typedef struct vf_cpu_budget {
    int online;      /* CPUs online on the machine */
    int affinity;    /* CPUs the affinity mask allows (online when it cannot be read) */
    double quota;    /* CPUs' worth of time the cgroup quota allows; 0: no quota found */
    int cpus;        /* what may be used: the fewer of affinity and the quota rounded up, >= 1 */
    char limit[160]; /* what set it, for messages: "affinity 2 of 2 CPUs", "cgroup quota 1.5" */
} vf_cpu_budget;

/* This process's budget now (read afresh: a process may be moved between cgroups). Any thread;
 * never fails (what cannot be read does not limit). */
void vfi_cpu_budget(vf_cpu_budget *b);

#endif /* VIDFEAT_CPUS_H */
