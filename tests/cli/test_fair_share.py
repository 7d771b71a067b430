#!/usr/bin/python3
"""A process given fewer CPUs than the machine has starts that many compute threads:

  affinity   under `taskset -c 0` (one CPU of several), `vidfeat bench -v` says 1 compute thread
             (affinity 1 of N CPUs) and its header threads: 1
  cgroup     in a cgroup whose CPU quota is half a CPU (v2 cpu.max, or v1's CFS quota; made here
             as root, removed after): 1 compute thread (cgroup quota 0.5 CPUs)
  default    unlimited: one per CPU; --threads N overrides

Each part skips (exit 77 at the end, naming it) where the machine cannot do it: one CPU, no
taskset, cgroups not writable.

usage: test_fair_share.py VIDFEAT MODELS_DIR
"""
import os
import shutil
import subprocess
import sys

from vfcheck import SKIP, check


def bench(exe, model, *prefix, extra=()):
    argv = [*prefix, exe, "bench", "--infer-only", "--model", model, "--batch", "4", "--runs",
            "1", "--images", "4", "-v", *extra]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "%s: %s" % (" ".join(argv), r.stderr[-1000:]))
    said = [x for x in r.stderr.splitlines() if "compute thread" in x]
    head = [x for x in r.stdout.splitlines() if "threads:" in x]
    return (said[0] if said else ""), (head[0] if head else "")


def cgroup_dir():
    """A new cgroup with a CPU quota of half a CPU, and the file a pid is written into to join
    it; (None, why) where none can be made."""
    name = "vidfeat_test_%d" % os.getpid()
    v2 = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(v2, "cgroup.controllers")):
        try:
            with open(os.path.join(v2, "cgroup.subtree_control")) as f:
                if "cpu" not in f.read().split():
                    with open(os.path.join(v2, "cgroup.subtree_control"), "w") as w:
                        w.write("+cpu")
            d = os.path.join(v2, name)
            os.mkdir(d)
            with open(os.path.join(d, "cpu.max"), "w") as f:
                f.write("50000 100000")
            return d, os.path.join(d, "cgroup.procs")
        except OSError as e:
            return None, "cgroup v2 not writable here (%s)" % e
    v1 = "/sys/fs/cgroup/cpu"
    try:
        d = os.path.join(v1, name)
        os.mkdir(d)
        with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
            f.write("100000")
        with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
            f.write("50000")
        return d, os.path.join(d, "tasks")
    except OSError as e:
        return None, "no writable cgroup cpu controller (%s)" % e


def main():
    exe, models = sys.argv[1:3]
    model = os.path.join(models, "tiny_cnn.onnx")
    cpus = len(os.sched_getaffinity(0))
    skipped = []

    said, head = bench(exe, model)
    check(said.endswith("%d compute thread%s (all %d CPUs)" % (cpus, "" if cpus == 1 else "s",
                                                                  os.cpu_count()))
          or "affinity %d of" % cpus in said, "default: %r" % said)
    check(head.rstrip().endswith("threads: %d (%s" % (cpus, said.rsplit("(", 1)[1].rstrip(")"))
                                 + ")"), "header: %r" % head)
    default = said.split(": ", 1)[-1]
    said, head = bench(exe, model, extra=("--threads", "3"))
    check(not said and "threads: 3 (--threads)" in head, "--threads 3: %r %r" % (said, head))
    print("ok default: %s; --threads overrides" % default)

    if cpus < 2 or not shutil.which("taskset"):
        skipped.append("affinity: %s" % ("one CPU" if cpus < 2 else "no taskset"))
    else:
        said, head = bench(exe, model, "taskset", "-c", "0")
        check(said.endswith("1 compute thread (affinity 1 of %d CPUs)" % os.cpu_count()) and
              "threads: 1 (affinity 1 of" in head, "taskset: %r %r" % (said, head))
        print("ok affinity: under taskset -c 0, %s" % said.split(": ", 1)[-1])

    if cpus < 2:
        skipped.append("cgroup: one CPU")
    else:
        d, join = cgroup_dir()
        if d is None:
            skipped.append("cgroup: %s" % join)
        else:
            try:
                said, head = bench(exe, model, "sh", "-c", 'echo $$ > "$0" && exec "$@"', join)
                check(said.endswith("1 compute thread (cgroup quota 0.5 CPUs)") and
                      "threads: 1 (cgroup quota 0.5 CPUs)" in head, "cgroup: %r %r" % (said, head))
                print("ok cgroup: with a quota of half a CPU, %s" % said.split(": ", 1)[-1])
            finally:
                os.rmdir(d)
    if skipped:
        print("SKIP: not checked here: %s" % "; ".join(skipped))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
