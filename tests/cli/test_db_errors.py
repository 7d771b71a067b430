#!/usr/bin/python3
"""Database trouble: a locked, read-only, corrupt or foreign database gives one clear line and
exit 3 (could not start), and a database vidfeat cannot use is left untouched; a PostgreSQL
address libpq cannot read never shows its password (libpq quotes such addresses).

usage: test_db_errors.py VIDFEAT MODELS_DIR SAMPLES_DIR
       test_db_errors.py --read-only VIDFEAT MODELS_DIR SAMPLES_DIR
The read-only cases are a test of their own (cli_db_readonly): as root they need a private mount
namespace and setpriv, and where those are refused that test skips (77) saying so.
"""
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time

from vfcheck import check


def run(exe, model, db, clip, timeout=60):
    return subprocess.run([exe, "--model", model, "-o", db, clip], capture_output=True,
                          text=True, timeout=timeout)


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def expect_refused(r, ro, before, what):
    check(r.returncode == 3 and "ro.db" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          "%s: %d %r" % (what, r.returncode, r.stderr))
    check(digest(ro) == before, "%s: the database was modified" % what)
    print("ok %s: %s" % (what, r.stderr.strip()))


def read_only_as_root(exe, model, clip, tmp, ro):
    """Root writes through file modes, so as root the read-only cases are made two other ways:
    a read-only mount of the database's directory (in a private mount namespace), and the
    command run as an unprivileged user (setpriv) on a file it may only read."""
    before = digest(ro)
    d = os.path.dirname(ro)
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 77\n'
              'shift; exec "$@"\n')
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", d, exe, "--model", model,
                        "--force", "-o", ro, clip], capture_output=True, text=True, timeout=60)
    if r.returncode == 77 or "unshare" in r.stderr:
        print("skipped: as root, and no private mount namespace here for a read-only mount (%s)"
              % r.stderr.strip())
        sys.exit(77)
    expect_refused(r, ro, before, "read-only file system")

    if not shutil.which("setpriv"):
        print("skipped: as root, and no setpriv (util-linux) to run as another user")
        sys.exit(77)
    # Everything the unprivileged user needs, where it can read it; the database read-only.
    box = tempfile.mkdtemp(prefix="vidfeat_ro_")
    try:
        os.chmod(box, 0o755)
        for src in (exe, model, clip):
            shutil.copy(src, box)
        ro2 = os.path.join(box, "ro.db")
        shutil.copy(ro, ro2)
        os.chmod(ro2, 0o444)
        os.chmod(box, 0o555)  # no new -wal/-shm files either
        before = digest(ro2)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            os.path.join(box, os.path.basename(exe)), "--model",
                            os.path.join(box, os.path.basename(model)), "--force", "-o", ro2,
                            os.path.join(box, os.path.basename(clip))],
                           capture_output=True, text=True, timeout=60)
        expect_refused(r, ro2, before, "read-only file (as an unprivileged user)")
    finally:
        os.chmod(box, 0o755)
        shutil.rmtree(box, ignore_errors=True)


def read_only(exe, model, clip, tmp):
    """A database vidfeat may not write: refused with one line naming it, the file unchanged."""
    ro = os.path.join(tmp, "ro.db")
    check(run(exe, model, ro, clip).returncode == 0, "creating ro.db")
    os.chmod(ro, stat.S_IRUSR)
    os.chmod(tmp, stat.S_IRUSR | stat.S_IXUSR)  # no new -wal/-shm files either
    try:
        if os.access(ro, os.W_OK):
            read_only_as_root(exe, model, clip, tmp, ro)
        else:
            expect_refused(run(exe, model, ro, clip), ro, digest(ro), "read-only database")
    finally:
        os.chmod(tmp, stat.S_IRWXU)
        os.chmod(ro, stat.S_IRUSR | stat.S_IWUSR)


def main():
    read_only_mode = sys.argv[1] == "--read-only"
    exe, models, samples = sys.argv[2:5] if read_only_mode else sys.argv[1:4]
    model = os.path.join(models, "tiny_cnn.onnx")
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    tmp = tempfile.mkdtemp(prefix="vidfeat_db_")
    if read_only_mode:
        try:
            read_only(exe, model, clip, tmp)
        finally:
            os.chmod(tmp, stat.S_IRWXU)
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    try:
        # PostgreSQL addresses libpq cannot read quote themselves in libpq's message: never the
        # password (as written or decoded), and the password warning all the same
        secrets = {"postgresql://u:s3cr%t@h/db": ["s3cr%t", "s3cr"],
                   "postgresql://u:pa%00ss@h/db": ["pa%00ss"],
                   "postgresql://u:hunter2@[::1/archive": ["hunter2"],
                   "postgresql://u:hunter2@[]/archive": ["hunter2"],
                   "postgresql://u@h/db?password=sesame&x=%zz": ["sesame"],
                   "postgres://u:p%40ss%2Fword@[::1/x": ["p%40ss%2Fword", "p@ss/word"]}
        for uri, words in secrets.items():
            for args in (["info", uri], ["--model", model, "-o", uri, clip]):
                r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
                said = r.stdout + r.stderr
                check(r.returncode == 3 and not any(w in said for w in words) and
                      "a password on the command line" in r.stderr and "cannot connect" in said,
                      "%s: exit %d %r" % (" ".join(args[:1]), r.returncode, said))
        print("ok URIs libpq cannot read: no password in any message, the warning given")

        # corrupt: garbage where a database should be; the file stays as it was
        bad = os.path.join(tmp, "corrupt.db")
        open(bad, "wb").write(b"this is not an SQLite database" * 100)
        before = digest(bad)
        r = run(exe, model, bad, clip)
        check(r.returncode == 3 and "corrupt.db" in r.stderr and
              len(r.stderr.strip().splitlines()) == 1, "corrupt: %d %r" % (r.returncode, r.stderr))
        check(digest(bad) == before, "the corrupt file was modified")
        print("ok corrupt database: %s" % r.stderr.strip())

        # someone else's database: refused, untouched
        other = os.path.join(tmp, "other.db")
        con = sqlite3.connect(other)
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
        before = digest(other)
        r = run(exe, model, other, clip)
        check(r.returncode == 3 and "did not create" in r.stderr, "foreign: %r" % r.stderr)
        check(digest(other) == before, "the foreign database was modified")
        print("ok foreign database: %s" % r.stderr.strip())

        # locked: another writer holds it for longer than the 5 s busy timeout
        locked = os.path.join(tmp, "locked.db")
        check(run(exe, model, locked, clip).returncode == 0, "creating locked.db")
        holder = sqlite3.connect(locked, isolation_level=None, timeout=1)
        holder.execute("BEGIN EXCLUSIVE")
        before = digest(locked)
        t0 = time.time()
        r = run(exe, model, locked, clip, timeout=60)
        waited = time.time() - t0
        after = digest(locked)
        holder.execute("ROLLBACK")
        holder.close()
        check(after == before, "locked: the database was modified")
        check(len(r.stderr.strip().splitlines()) == 1, "locked: not one line: %r" % r.stderr)
        check(r.returncode == 3 and "locked" in r.stderr, "locked: %d %r" % (r.returncode,
                                                                            r.stderr))
        check(4.0 <= waited < 30.0, "locked: gave up after %.1f s" % waited)
        print("ok locked database (%.1f s): %s" % (waited, r.stderr.strip()))
        # ...and once the other writer is gone, the same database works
        r = run(exe, model, locked, clip)
        check(r.returncode == 0, "after unlock: %r" % r.stderr)

        # an older schema (1: before the runs table) is readable as it is and migrated in place
        # on the first write, its rows kept and its finished files still recognised as done
        old = os.path.join(tmp, "v1.db")
        check(run(exe, model, old, clip).returncode == 0, "creating v1.db")
        con = sqlite3.connect(old)
        con.execute("DROP TABLE runs")
        con.execute("DROP TABLE shots")  # schema 10's
        con.execute("DROP TABLE leases")  # schema 3's
        con.execute("DROP TABLE queue")
        con.execute("DROP VIEW frames")  # schema 4's
        con.execute("ALTER TABLE features DROP COLUMN t_end")  # schema 9's
        con.execute("ALTER TABLE models DROP COLUMN weights")  # schema 5's
        con.execute("ALTER TABLE models DROP COLUMN text_sha256")  # schema 7's
        con.execute("ALTER TABLE indexes DROP COLUMN sha256")  # schema 8's
        con.execute("DROP TABLE indexes")  # schema 6's
        con.execute("DROP TRIGGER extraction_ids")
        con.execute("DROP TABLE extraction_ids")
        con.execute("PRAGMA user_version=1")
        con.commit()
        con.close()
        r = subprocess.run([exe, "info", old], capture_output=True, text=True)
        check(r.returncode == 0 and "schema 1" in r.stdout and "20 vectors" in r.stdout,
              "info on v1: %r %r" % (r.stdout, r.stderr))
        rotated = os.path.join(samples, "rotated90_64x48.mp4")
        r = subprocess.run([exe, "--model", model, "-o", old, "-v", "--json", clip, rotated],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "migrated" in r.stderr, "migrating: %r" % r.stderr)
        con = sqlite3.connect(old)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = con.execute("SELECT count(*) FROM features").fetchone()[0]
        done = con.execute("SELECT count(*) FROM extractions WHERE status='done'").fetchone()[0]
        views = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='view'")}
        columns = {c[1] for c in con.execute("PRAGMA table_info(models)")}
        columns |= {"features." + c[1] for c in con.execute("PRAGMA table_info(features)")}
        check(version == 10 and "shots" in tables and {"runs", "queue", "leases", "indexes", "extraction_ids"} <= tables and
              views == {"frames"} and {"weights", "text_sha256", "features.t_end"} <= columns,
              "after migration: %d %s %s" % (version, tables, columns))
        summary = json.loads(r.stdout)
        check(summary["skipped"] == 1 and summary["done"] == 1, summary)
        check(rows == 20 + summary["frames"] and done == 2,
              "after migration: %d rows, %d done" % (rows, done))
        con.close()
        print("ok schema 1 migrated to 8")

        # a newer schema than this vidfeat knows: refused with one line, the file unchanged
        newer = os.path.join(tmp, "newer.db")
        check(run(exe, model, newer, clip).returncode == 0, "creating newer.db")
        con = sqlite3.connect(newer)
        con.execute("PRAGMA user_version=99")
        con.commit()
        con.close()
        before = digest(newer)
        r = run(exe, model, newer, os.path.join(samples, "rotated90_64x48.mp4"))
        check(r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1 and
              "newer.db" in r.stderr and "99" in r.stderr,
              "newer schema: %d %r" % (r.returncode, r.stderr))
        check(digest(newer) == before, "newer schema: the database was modified")
        print("ok newer schema refused, file unchanged: %s" % r.stderr.strip())
    finally:
        os.chmod(tmp, stat.S_IRWXU)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
