#!/usr/bin/python3
"""The Slurm samples, run unchanged by a real one-node Slurm cluster (slurmcluster.py) against a
real PostgreSQL (pgserver.py) and on SQLite files, each case ending with every file done exactly
once and the same vectors, bit for bit, as one process alone over the same archive:

  job array     samples/slurm/workers-postgres.sbatch as an array of three queue workers (two
                CPUs: the third starts late) over an enqueued archive; their --json frames add
                up to the rows
  preempted     one task cancelled by scancel mid-file (Slurm's SIGTERM); a second submission
                finishes the archive, the cancelled file included
  shards        samples/slurm/shards-sqlite.sbatch (three tasks, --shard into one SQLite file
                each) then the merge job the sample describes, run after it by --dependency

Exits 77 (saying why) only when ffmpeg, PostgreSQL, Slurm or munge is not installed, or when
not run as root (slurmd is root's).

usage: test_slurm.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from pgserver import PgServer, Unavailable as PgUnavailable
from slurmcluster import SlurmCluster, Unavailable as SlurmUnavailable
from test_workers import LONG, Postgres, Sqlite, extractions, make_clips, rows_of, wait_for
from test_workers import check_exactly_once as workers_check_exactly_once
from vfcheck import check

# what the samples' VIDFEAT_* variables add to their command lines, and so the reference's
FPS = "25"
ARGS = "--backend ref --batch 4 --decode-threads 1 --json"


def reference(exe, model, db, root):
    """One process alone over the archive: the rows every case must reproduce."""
    r = subprocess.run([exe, "-o", db, "--root", root, "--model", model, "--fps", FPS,
                        "--threads", "1", *ARGS.split(), root], capture_output=True, text=True,
                       timeout=300)
    check(r.returncode == 0, "reference run: exit %d: %s" % (r.returncode, r.stderr))


def check_exactly_once(store, db, ref, what):
    """test_workers' check (each file's one extraction, the one-process vectors bit for bit),
    with the whole archive there and no name outside the root."""
    ref_rows, ref_ext = ref
    ext = extractions(store, db)
    check(ext.keys() == ref_ext.keys(), "%s: files %r, one process %r" %
          (what, sorted(ext), sorted(ref_ext)))
    paths = [p for (p,) in store.query(db, "SELECT path FROM videos")]
    check(all(not p.startswith("/") for p in paths), "%s: names not relative to the archive's"
          " root: %r" % (what, paths))
    workers_check_exactly_once(store, db, ref_rows, ref_ext, what)


def job_env(model, **kw):
    env = ",".join("%s=%s" % kv for kv in sorted(kw.items()))
    return "--export=ALL,VIDFEAT_MODEL=%s,VIDFEAT_FPS=%s,%s" % (model, FPS, env)


def errors(pattern):
    """What the tasks wrote to stderr (their --error files)."""
    out = []
    for f in sorted(glob.glob(pattern)):
        with open(f) as fh:
            out.append("%s: %s" % (os.path.basename(f), fh.read().strip()))
    return "\n".join(out)


def task_docs(pattern, n):
    """The --json document each of n array tasks printed (their --output files)."""
    files = sorted(glob.glob(pattern))
    check(len(files) == n, "%d task outputs, want %d: %r" % (len(files), n, files))
    docs = []
    for f in files:
        with open(f) as fh:
            text = fh.read()
        try:
            docs.append(json.loads(text))
        except ValueError:
            check(False, "%s is not one JSON document: %r" % (f, text[:400]))
    return docs


def job_array(slurm, store, exe, model, samples, archive, tmp, ref):
    db = store.new()
    r = subprocess.run([exe, "enqueue", "-o", db, "--root", archive, archive],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "enqueue: %s" % r.stderr)
    r = slurm.run("sbatch", "--parsable", "--wait", "--array=0-2", "--cpus-per-task=1",
                  "--output=%s/pg-%%A_%%a.json" % tmp, "--error=%s/pg-%%A_%%a.err" % tmp,
                  job_env(model, VIDFEAT_DB=db, ARCHIVE_ROOT=archive, VIDFEAT_ARGS=ARGS),
                  os.path.join(samples, "slurm", "workers-postgres.sbatch"), check=False,
                  timeout=400)
    jid = r.stdout.strip().split(";")[0]
    check(r.returncode == 0, "the job array: exit %d: %s\n%s\n%s" %
          (r.returncode, r.stderr, errors("%s/pg-%s_*.err" % (tmp, jid)), slurm.logs()))
    docs = task_docs("%s/pg-%s_*.json" % (tmp, jid), 3)
    check(sum(d["frames"] for d in docs) == len(ref[0]),
          "the tasks' frames %r, rows %d" % ([d["frames"] for d in docs], len(ref[0])))
    check_exactly_once(store, db, ref, "job array")
    print("ok Slurm: workers-postgres.sbatch, three tasks (frames %s), each file once, the"
          " same vectors as one process" % "/".join(str(d["frames"]) for d in docs))


def preempted(slurm, store, exe, model, samples, archive, tmp, ref):
    db = store.new()
    r = subprocess.run([exe, "enqueue", "-o", db, "--root", archive,
                        os.path.join(archive, LONG)], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "enqueue: %s" % r.stderr)
    sample = os.path.join(samples, "slurm", "workers-postgres.sbatch")
    env = job_env(model, VIDFEAT_DB=db, ARCHIVE_ROOT=archive, VIDFEAT_ARGS=ARGS)
    jid = slurm.run("sbatch", "--parsable", "--array=0-0", "--cpus-per-task=1",
                    "--output=%s/cancelled-%%A_%%a.log" % tmp, env, sample).stdout.strip()
    wait_for(lambda: rows_of(store, db, LONG) > 0, "rows of the long clip", timeout=120)
    slurm.run("scancel", jid)
    t0 = time.time()
    while slurm.jobs() and time.time() - t0 < 60:
        time.sleep(0.2)
    check(not slurm.jobs(), "the cancelled job is still there: %r" % slurm.jobs())
    ext = extractions(store, db)
    check(ext[LONG][0][0] != "done", "the long clip was done before the job was cancelled")
    # the rest of the archive too: the same queue, the long clip among the files
    r = subprocess.run([exe, "enqueue", "-o", db, "--root", archive, archive],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "enqueue: %s" % r.stderr)
    r = slurm.run("sbatch", "--wait", "--array=0-1", "--cpus-per-task=1",
                  "--output=%s/resumed-%%A_%%a.log" % tmp, env, sample, check=False,
                  timeout=400)
    check(r.returncode == 0, "the second job array: exit %d: %s" % (r.returncode, r.stderr))
    check_exactly_once(store, db, ref, "preempted")
    print("ok Slurm: a task cancelled mid-file (recorded %s: %s); the next submission finished"
          " the archive, each file once" % (ext[LONG][0][0], ext[LONG][0][2]))


def shards(slurm, exe, model, samples, archive, tmp, ref):
    out = os.path.join(tmp, "parts")
    listing = os.path.join(tmp, "archive.list")
    with open(listing, "wb") as f:
        for name in sorted(os.listdir(archive)):
            f.write(os.path.join(archive, name).encode() + b"\0")
    jid = slurm.run("sbatch", "--parsable", "--array=0-2", "--cpus-per-task=1",
                    "--output=%s/shard-%%A_%%a.json" % tmp, "--error=%s/shard-%%A_%%a.err" % tmp,
                    job_env(model, ARCHIVE_ROOT=archive, LIST=listing, OUT=out,
                            VIDFEAT_ARGS=ARGS),
                    os.path.join(samples, "slurm", "shards-sqlite.sbatch")).stdout.strip()
    jid = jid.split(";")[0]
    r = slurm.run("sbatch", "--wait", "--dependency=afterany:" + jid, "--chdir=" + tmp,
                  "--output=%s/merge.log" % tmp, "--wrap",
                  "vidfeat merge archive.db parts/part-*.db", check=False, timeout=400)
    with open(os.path.join(tmp, "merge.log")) as f:
        merge_log = f.read()
    check(r.returncode == 0, "the merge job: exit %d: %s %s\n%s" %
          (r.returncode, r.stderr, merge_log, errors("%s/shard-%s_*.err" % (tmp, jid))))
    docs = task_docs("%s/shard-%s_*.json" % (tmp, jid), 3)
    parts = sorted(os.listdir(out))
    check(parts == ["part-0.db", "part-1.db", "part-2.db"], "the parts: %r" % parts)
    done = sum(d["done"] for d in docs)
    check(done == len(ref[1]), "the shards did %d files, the archive has %d" %
          (done, len(ref[1])))
    check_exactly_once(Sqlite(tmp), os.path.join(tmp, "archive.db"), ref, "shards + merge")
    print("ok Slurm: shards-sqlite.sbatch, three shards (%s files) merged by a dependent job:"
          " each file once, the same vectors as one process" %
          "/".join(str(d["done"]) for d in docs))


def main():
    exe, models, samples = (os.path.abspath(a) for a in sys.argv[1:4])
    if not shutil.which("ffmpeg"):
        print("skip: ffmpeg is not installed")
        return 77
    model = os.path.join(models, "tiny_cnn.onnx")
    try:
        cluster = SlurmCluster()  # first: it makes nothing
        server = PgServer()
    except (PgUnavailable, SlurmUnavailable) as e:
        print("skip: %s" % e)
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_slurm_test_")
    try:
        os.chmod(tmp, 0o755)
        archive = os.path.join(tmp, "archive")
        make_clips(archive)
        with server as pg, cluster as slurm:
            slurm.env["PATH"] = os.path.dirname(exe) + os.pathsep + slurm.env["PATH"]
            pg_store = Postgres(pg)
            db = pg_store.new()
            reference(exe, model, db, archive)
            ref_pg = pg_store.rows(db), extractions(pg_store, db)
            sq_store = Sqlite(tmp)
            db = sq_store.new()
            reference(exe, model, db, archive)
            ref_sq = sq_store.rows(db), extractions(sq_store, db)
            job_array(slurm, pg_store, exe, model, samples, archive, tmp, ref_pg)
            preempted(slurm, pg_store, exe, model, samples, archive, tmp, ref_pg)
            shards(slurm, exe, model, samples, archive, tmp, ref_sq)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
