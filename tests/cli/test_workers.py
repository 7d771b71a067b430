#!/usr/bin/python3
"""Many workers on one database, on SQLite and on a real PostgreSQL (pgserver.py), each case
ending with every file done exactly once and the same vectors, bit for bit, as one process
alone over the same files:

  shared list   three processes given the same files at once share them; --json's frames add
                up to the rows; each file is reported done by exactly one of them
  queue         vidfeat enqueue --root A, then two workers with no inputs and --root B (the
                same archive mounted elsewhere)
  kill -9       a worker killed mid-file; the next worker takes the file over at once (its
                owner is gone) and its partial rows are replaced
  SIGSTOP       a worker paused past its lease (--lease 2); another finishes the file; the
                paused one, woken, is refused (fenced), drops the file and writes nothing
  max attempts  a file whose worker is killed three times is marked failed with that reason;
                the other files are done
  restart       (PostgreSQL) the server restarted mid-file: the worker reconnects with backoff
                and finishes; nothing lost, nothing twice; one warning line per connection
  terminated    (PostgreSQL) an administrator ends the worker's sessions (pg_terminate_backend):
                one warning line each, with the server's reason; the run finishes
  unreachable   (PostgreSQL) a worker with no server: one line naming it, exit 3

--sqlite runs the SQLite half, --pg the PostgreSQL half; each exits 77 (saying why) only when
ffmpeg, or PostgreSQL for --pg, is not installed.

usage: test_workers.py --sqlite|--pg VIDFEAT MODELS_DIR
"""
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

from pgserver import PgServer, Unavailable
from vfcheck import check

LONG = "long90.mp4"


def make_clips(d):
    """Six short clips of different pictures and one long one (a few seconds of work)."""
    os.makedirs(d, exist_ok=True)
    sources = ["testsrc", "testsrc2", "smptebars", "rgbtestsrc", "mandelbrot", "yuvtestsrc"]
    for i, src in enumerate(sources):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "%s=size=64x48:rate=25" % src, "-t", str(1 + i % 3), "-c:v", "libx264",
                        "-threads", "1", os.path.join(d, "c%d.mp4" % i)], check=True)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=320x240:rate=25", "-t", "90", "-c:v", "libx264", "-threads",
                    "1", os.path.join(d, LONG)], check=True)
    return sorted(os.path.join(d, f) for f in os.listdir(d))


def wait_stopped(proc):
    """Wait (at most 2 s) until every thread of proc is stopped: kill() only queues SIGSTOP."""
    task = "/proc/%d/task" % proc.pid
    for _ in range(200):
        try:
            states = []
            for t in os.listdir(task):
                with open(os.path.join(task, t, "stat")) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:  # gone, or a thread ended while we looked: look again
            states = None
        if states is not None and all(st in ("T", "t") for st in states):
            return
        if proc.poll() is not None:
            return
        time.sleep(0.01)


class Sqlite:
    name = "SQLite"

    def __init__(self, tmp):
        self.tmp = tmp
        self.n = 0

    def new(self):
        self.n += 1
        return os.path.join(self.tmp, "db%d.sqlite" % self.n)

    def query(self, db, sql):
        con = sqlite3.connect(db, timeout=30)
        rows = con.execute(sql).fetchall()
        con.close()
        return rows

    def pause(self, proc, db):
        """SIGSTOP proc outside a write transaction: one process stopped inside one holds the
        file's only write lock, and no other worker can write until it resumes (SQLite's single
        writer; README says so). That case is not what the fence is for."""
        for _ in range(200):
            proc.send_signal(signal.SIGSTOP)
            wait_stopped(proc)  # the signal arrives later: probe only a process that has stopped
            try:
                con = sqlite3.connect(db, timeout=0, isolation_level=None)
                con.execute("BEGIN IMMEDIATE")
                con.execute("ROLLBACK")
                con.close()
                return
            except sqlite3.OperationalError:  # stopped while writing: let it finish that batch
                proc.send_signal(signal.SIGCONT)
                time.sleep(0.01)
        raise AssertionError("the worker was always inside a write transaction")

    def rows(self, db):
        out = {}
        for p, i, v in self.query(db, "SELECT v.path, f.frame_index, f.vec FROM features f JOIN"
                                      " extractions e ON e.id = f.extraction_id JOIN videos v"
                                      " ON v.id = e.video_id"):
            out[(os.path.basename(p), i)] = bytes(v)
        return out


class Postgres:
    name = "PostgreSQL"

    def __init__(self, pg):
        self.pg = pg
        self.n = 0

    def new(self):
        self.n += 1
        return self.pg.uri("w%d" % self.n)

    def _db(self, uri):
        return uri.rsplit("/", 1)[1]

    def query(self, uri, sql):
        text = self.pg.psql(self._db(uri), "COPY (%s) TO STDOUT" % sql)
        return [tuple(None if x == "\\N" else x for x in line.split("\t"))
                for line in text.splitlines()]

    def pause(self, proc, uri):
        """SIGSTOP anywhere: a session stopped inside a transaction is ended by the server."""
        proc.send_signal(signal.SIGSTOP)

    def rows(self, uri):
        out = {}
        for p, i, vec in self.query(uri, "SELECT v.path, f.frame_index, f.vec FROM features f"
                                         " JOIN extractions e ON e.id = f.extraction_id JOIN"
                                         " videos v ON v.id = e.video_id"):
            vals = [float(x) for x in vec.strip("{}").split(",")]
            out[(os.path.basename(p), int(i))] = struct.pack("<%df" % len(vals), *vals)
        return out


def extractions(store, db):
    """{basename: [(status, frames, error)]} - every extraction of each file."""
    out = {}
    for p, st, frames, err in store.query(db, "SELECT v.path, e.status, e.frames, e.error FROM"
                                              " extractions e JOIN videos v ON v.id ="
                                              " e.video_id"):
        out.setdefault(os.path.basename(p), []).append((st, int(frames), err))
    return out


def lease_of(store, db, name):
    try:
        rows = store.query(db, _lease_sql(name))
    except Exception:  # the database not made yet
        return None
    return rows[0] if rows else None


def _lease_sql(name):
    return ("SELECT state, owner, attempts FROM leases WHERE path LIKE '%%/%s' OR path = '%s'"
            % (name, name))


def rows_of(store, db, name):
    try:
        return _rows_of(store, db, name)
    except Exception:  # the database not made yet
        return 0


def _rows_of(store, db, name):
    return int(store.query(db, "SELECT count(*) FROM features f JOIN extractions e ON e.id ="
                               " f.extraction_id JOIN videos v ON v.id = e.video_id WHERE"
                               " v.path LIKE '%%/%s' OR v.path = '%s'" % (name, name))[0][0])


def start(exe, model, db, *args):
    return subprocess.Popen([exe, "--model", model, "--backend", "ref", "--batch", "4",
                             "--decode-threads", "1", "-o", db, "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=300):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # never left behind
        proc.communicate()
        raise
    return proc.returncode, out, err


def reconnected(line):
    """The one warning line of a PostgreSQL connection lost and made again."""
    return line.startswith("vidfeat: warning[store]: postgresql://") and \
        "connection lost" in line and "; made again after " in line


def wait_for(cond, what, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def check_exactly_once(store, db, ref_rows, ref_ext, what):
    ext = extractions(store, db)
    for name, runs in ref_ext.items():
        got = ext.get(name, [])
        check(len(got) == 1 and got[0][0] == runs[0][0] and got[0][1] == runs[0][1],
              "%s: %s: %r, one process: %r" % (what, name, got, runs))
    rows = store.rows(db)
    check(rows.keys() == ref_rows.keys(), "%s: %d rows, one process %d" %
          (what, len(rows), len(ref_rows)))
    bad = [k for k in ref_rows if rows[k] != ref_rows[k]]
    check(not bad, "%s: %d vectors differ from one process's, e.g. %r" %
          (what, len(bad), bad[:3]))


def cases(store, exe, model, clips, tmp, pg=None):
    tag = store.name
    short = [c for c in clips if not c.endswith(LONG)]
    long = [c for c in clips if c.endswith(LONG)][0]

    # one process alone: the reference
    ref = store.new()
    code, out, err = finish(start(exe, model, ref, *clips))
    check(code == 0, "%s reference run: %s" % (tag, err))
    ref_rows, ref_ext = store.rows(ref), extractions(store, ref)
    check(len(ref_ext) == len(clips), "%s reference: %r" % (tag, ref_ext))

    # three processes given the same files at once
    db = store.new()
    procs = [start(exe, model, db, *clips) for _ in range(3)]
    results = [finish(p) for p in procs]
    for code, out, err in results:
        check(code == 0, "%s shared list: exit %d: %s" % (tag, code, err))
    docs = [json.loads(out) for _, out, _ in results]
    done_by = {}
    for d in docs:
        for f in d["files"]:
            if f["status"] == "done":
                done_by.setdefault(os.path.basename(f["path"]), []).append(1)
    check(all(len(done_by.get(os.path.basename(c), [])) == 1 for c in clips),
          "%s shared list: files done by several or none: %r" % (tag, done_by))
    check(sum(d["frames"] for d in docs) == len(ref_rows),
          "%s shared list: frames %r, rows %d" % (tag, [d["frames"] for d in docs],
                                                   len(ref_rows)))
    check_exactly_once(store, db, ref_rows, ref_ext, tag + " shared list")
    print("ok %s: three processes shared %d files, each extracted once (%s)" %
          (tag, len(clips), ", ".join(str(d["done"]) for d in docs)))

    # enqueue under one root, two queue workers under another (the archive mounted elsewhere)
    db = store.new()
    root_a = os.path.join(tmp, "mount_a")
    root_b = os.path.join(tmp, "mount_b")
    for r in (root_a, root_b):
        shutil.rmtree(r, ignore_errors=True)
        shutil.copytree(os.path.dirname(clips[0]), r)
    r = subprocess.run([exe, "enqueue", "-o", db, "--root", root_a, root_a], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, "%s enqueue: %s" % (tag, r.stderr))
    names = sorted(p for (p,) in store.query(db, "SELECT path FROM queue"))
    check(names == sorted(os.path.basename(c) for c in clips), "%s queue: %r" % (tag, names))
    procs = [start(exe, model, db, "--root", root_b) for _ in range(2)]
    for code, out, err in (finish(p) for p in procs):
        check(code == 0, "%s queue worker: exit %d: %s" % (tag, code, err))
    check_exactly_once(store, db, ref_rows, ref_ext, tag + " queue")
    paths = [p for (p,) in store.query(db, "SELECT path FROM videos")]
    check(all(not p.startswith("/") for p in paths), "%s: names not relative: %r" % (tag, paths))
    print("ok %s: enqueue --root A, two workers --root B: each file once, names relative" % tag)

    # kill -9 mid-file: the next worker takes the file over at once
    db = store.new()
    w = start(exe, model, db, long, *short)
    wait_for(lambda: rows_of(store, db, LONG) > 0, "rows of the long clip")
    w.kill()
    w.wait()
    check(extractions(store, db)[LONG][0][0] == "running", "%s: not killed mid-file" % tag)
    code, out, err = finish(start(exe, model, db, *clips))
    check(code == 0, "%s after kill -9: %s" % (tag, err))
    check_exactly_once(store, db, ref_rows, ref_ext, tag + " kill -9")
    print("ok %s: a worker killed mid-file; the next took the file over, rows replaced" % tag)

    # SIGSTOP past the lease: fenced when it wakes
    db = store.new()
    a = start(exe, model, db, "--lease", "2", long)
    wait_for(lambda: rows_of(store, db, LONG) > 0, "rows of the long clip")
    store.pause(a, db)
    try:
        time.sleep(2.6)
        code, out, err = finish(start(exe, model, db, "--lease", "2", long))
        check(code == 0 and json.loads(out)["done"] == 1, "%s: the second worker: %s %s" %
              (tag, out, err))
    finally:
        a.send_signal(signal.SIGCONT)
    code, out, err = finish(a)
    doc = json.loads(out)
    check(code == 0 and doc["dropped"] == 1 and doc["files"][0]["status"] == "dropped",
          "%s: the paused worker: exit %d %s %s" % (tag, code, out, err))
    # paused inside a transaction, its session was ended by the server (idle_in_transaction_
    # session_timeout): a warning that the connection was made again may come first
    lines = [l for l in err.splitlines() if not reconnected(l)]
    check(len(lines) == 1 and "dropped" in lines[0] and LONG in lines[0] and
          all(l.startswith("vidfeat: ") for l in err.splitlines()),
          "%s: the paused worker's line: %r" % (tag, err))
    ref_long = {k: v for k, v in ref_rows.items() if k[0] == LONG}
    check_exactly_once(store, db, ref_long, {LONG: ref_ext[LONG]}, tag + " SIGSTOP")
    print("ok %s: a worker paused past its lease was fenced and dropped the file" % tag)

    # a file that kills its worker: failed after --max-attempts (3)
    db = store.new()
    for attempt in range(3):
        w = start(exe, model, db, long, short[0])
        mine = ":%d:" % w.pid  # claimed by this worker (the last one's claim is still there)
        wait_for(lambda: mine in ((lease_of(store, db, LONG) or ("", ""))[1] or ""),
                 "the long clip claimed by worker %d" % attempt)
        w.kill()
        w.wait()
    code, out, err = finish(start(exe, model, db, long, short[0]))
    doc = json.loads(out)
    status = {os.path.basename(f["path"]): f for f in doc["files"]}
    check(code == 1 and status[LONG]["status"] == "failed" and "3 attempts" in
          status[LONG]["error"] and status[os.path.basename(short[0])]["status"] in
          ("done", "skipped"),
          "%s max attempts: exit %d %s" % (tag, code, out))
    ext = extractions(store, db)
    check(ext[LONG][0][0] == "failed" and "3 attempts" in (ext[LONG][0][2] or ""),
          "%s max attempts: %r" % (tag, ext[LONG]))
    other = os.path.basename(short[0])  # done by one of the workers, once
    check(ext[other] == ref_ext[other], "%s max attempts: %r" % (tag, ext[other]))
    code, out, err = finish(start(exe, model, db, long, short[0]))
    doc = json.loads(out)
    status = {os.path.basename(f["path"]): f["status"] for f in doc["files"]}
    check(status[LONG] == "failed" and doc["frames"] == 0,
          "%s: a rerun tried the failed file again: %s" % (tag, out))
    print("ok %s: a file that killed its worker 3 times is failed, not retried" % tag)

    if not pg:
        return
    # the server restarted mid-file
    db = store.new()
    w = start(exe, model, db, *clips)
    wait_for(lambda: rows_of(store, db, LONG) > 0, "rows of the long clip")
    pg.restart()
    code, out, err = finish(w)
    check(code == 0, "%s restart: exit %d: %s" % (tag, code, err))
    check(any(reconnected(l) for l in err.splitlines()) and
          all(reconnected(l) or "info[" in l for l in err.splitlines()),
          "%s restart: not one warning line per connection made again: %r" % (tag, err))
    check_exactly_once(store, db, ref_rows, ref_ext, tag + " restart")
    print("ok %s: the server restarted mid-file; the worker reconnected and finished" % tag)

    # an administrator ends the worker's sessions (found by their application_name)
    db = store.new()
    w = start(exe, model, db, *clips)
    wait_for(lambda: rows_of(store, db, LONG) > 0, "rows of the long clip")
    ended = pg.psql(store._db(db), "SELECT count(pg_terminate_backend(pid)) FROM"
                    " pg_stat_activity WHERE application_name = 'vidfeat'"
                    " AND datname = current_database()")
    code, out, err = finish(w)
    said = "connection lost (terminating connection due to administrator command)"
    check(int(ended) >= 1 and code == 0 and any(said in l for l in err.splitlines()) and
          all(reconnected(l) or "info[" in l for l in err.splitlines()),
          "%s terminated: %s sessions, exit %d: %r" % (tag, ended.strip(), code, err))
    check_exactly_once(store, db, ref_rows, ref_ext, tag + " terminated")
    print("ok %s: the worker's sessions ended by an administrator (%d): one warning line each,"
          " the server's reason in it; finished" % (tag, int(ended)))

    # unreachable at start
    r = subprocess.run([exe, "--model", model, "-o", "postgresql://127.0.0.1:1/none"],
                       capture_output=True, text=True, timeout=60)
    lines = [l for l in r.stderr.splitlines() if "info[backend]" not in l]
    check(r.returncode == 3 and len(lines) == 1 and "127.0.0.1" in lines[0],
          "unreachable: %d %r" % (r.returncode, r.stderr))
    print("ok PostgreSQL: unreachable at start: one line, exit 3")


def main():
    mode, exe, models = sys.argv[1:4]
    if not shutil.which("ffmpeg"):
        print("skip: ffmpeg is not installed")
        return 77
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_workers_")
    try:
        clips = make_clips(os.path.join(tmp, "clips"))
        if mode == "--sqlite":
            cases(Sqlite(tmp), exe, model, clips, tmp)
        else:
            try:
                server = PgServer()
            except Unavailable as e:
                print("skip: %s" % e)
                return 77
            with server as pg:
                cases(Postgres(pg), exe, model, clips, tmp, pg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
