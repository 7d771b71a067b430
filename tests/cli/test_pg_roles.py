#!/usr/bin/python3
"""Least privilege on PostgreSQL (docs/archives.md "PostgreSQL roles"), on a real server: its SQL
blocks run as written; password authentication on, the passwords in a PGPASSFILE, not in URIs
(no warning line); the owner role makes the tables (enqueue); the worker role does a whole run,
reads it back (info, export), and cannot create, drop or truncate a table, enqueue, or read
another schema; the reader role serves the page's API (vidfeat serve: status, similar, matches,
thumbnails) and cannot write; a grant taken away is said as such, naming the role; a worker on a
database whose tables are not made yet says it may not make them.

usage: test_pg_roles.py VIDFEAT MODELS_DIR SAMPLES_DIR docs/archives.md
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

from vfcheck import check, SKIP


def readme_sql(readme, name):
    text = open(readme).read()
    m = re.search(r"```sql\n-- vidfeat: %s\n(.*?)```" % re.escape(name), text, re.S)
    check(m, "%s has no SQL block '%s'" % (readme, name))
    return m.group(1)


def check_reader(exe, env, pg, archive, as_role, readme):
    """vidfeat serve as the reader role: the API answers; the role cannot write."""
    from serveproc import Server
    grants = as_role("vidfeat_owner", readme_sql(readme, "reader grants"))
    check(grants.returncode == 0, "reader grants: %s" % grants.stderr)
    reader = "postgresql://vidfeat_reader@127.0.0.1:%d/archive" % pg.port
    clip = "testsrc_64x48.mp4"  # as recorded: relative to --root
    with Server(exe, reader, "--root", archive, env=env) as s:
        for url in ("/api/status", "/api/similar?" + urllib.parse.urlencode(
                {"path": clip, "t": 0.1, "k": 3}), "/api/matches",
                    "/api/thumb?" + urllib.parse.urlencode({"path": clip, "t": 0.1})):
            st, _, body = s.get(url)
            check(st == 200, "serve as the reader: %s: %d %s" % (url, st, body[:300]))
        status = json.loads(s.get("/api/status")[2])
        check(status["summary"]["done"] == 2, "the reader's status: %s" % status)
        code, err = s.stop()
        check(code == 0, "serve as the reader: exit %d %s" % (code, err))
    for sql in ("DELETE FROM features", "INSERT INTO queue (path) VALUES ('x.mp4')",
                "UPDATE extractions SET status = 'failed'", "CREATE TABLE mine (x int)"):
        r = as_role("vidfeat_reader", sql)
        check(r.returncode != 0 and "permission denied" in r.stderr,
              "the reader could: %s (%r)" % (sql, r.stderr))
    print("ok vidfeat serve as README's reader role: status, similar, matches, thumbnails; "
          "the role cannot write")


def main():
    exe, models, samples, readme = sys.argv[1:5]
    try:
        from pgserver import PgServer, Unavailable
        server = PgServer()
    except Unavailable as e:
        print("SKIP:", e)
        sys.exit(SKIP)
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_roles_")
    try:
        with server as pg:
            pg.psql("postgres", "CREATE DATABASE archive")
            pg.psql("archive", readme_sql(readme, "roles"))
            pg.psql("postgres", "ALTER ROLE vidfeat_owner PASSWORD 'owner-pw';"
                    " ALTER ROLE vidfeat_worker PASSWORD 'worker-pw';"
                    " ALTER ROLE vidfeat_reader PASSWORD 'reader-pw'")
            # passwords required of everyone but the test's own superuser
            hba = os.path.join(pg.data, "pg_hba.conf")
            with open(hba, "w") as f:
                f.write("local all postgres trust\nhost all postgres 127.0.0.1/32 trust\n"
                        "host all all 127.0.0.1/32 scram-sha-256\n")
            pg.psql("postgres", "SELECT pg_reload_conf()")
            passfile = os.path.join(tmp, "pgpass")
            with open(passfile, "w") as f:
                f.write("127.0.0.1:%d:archive:vidfeat_owner:owner-pw\n"
                        "127.0.0.1:%d:archive:vidfeat_worker:worker-pw\n"
                        "127.0.0.1:%d:archive:vidfeat_reader:reader-pw\n"
                        % (pg.port, pg.port, pg.port))
            os.chmod(passfile, 0o600)
            env = dict(os.environ, PGPASSFILE=passfile)
            owner = "postgresql://vidfeat_owner@127.0.0.1:%d/archive" % pg.port
            worker = "postgresql://vidfeat_worker@127.0.0.1:%d/archive" % pg.port

            def run(*args):
                return subprocess.run([exe, *args], capture_output=True, text=True, env=env,
                                      timeout=120)

            def as_role(role, sql):
                return subprocess.run(
                    ["psql", "postgresql://%s@127.0.0.1:%d/archive" % (role, pg.port), "-X",
                     "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                    capture_output=True, text=True, env=env, timeout=60)

            archive = os.path.join(tmp, "archive")
            os.makedirs(archive)
            for name in ("testsrc_64x48.mp4", "one_gop_12s.mp4"):
                shutil.copy(os.path.join(samples, name), archive)

            # before the tables exist the worker may not make them
            r = run("--model", model, "-o", worker, "--root", archive, archive)
            check(r.returncode == 3 and r.stderr.count("\n") == 1 and
                  "creating the tables: permission denied for schema vidfeat: the role "
                  "vidfeat_worker lacks that grant" in r.stderr, "worker first: %r" % r.stderr)

            r = run("enqueue", "-o", owner, "--root", archive, archive)
            check(r.returncode == 0 and r.stderr == "vidfeat: 2 files queued\n",
                  "owner enqueue: %r" % r.stderr)
            grants = as_role("vidfeat_owner", readme_sql(readme, "worker grants"))
            check(grants.returncode == 0, "grants: %s" % grants.stderr)
            print("ok README's roles block; the owner makes the tables (enqueue), grants as "
                  "written; no password on any command line")

            r = run("--model", model, "--max-frames", "6", "-o", worker, "--root", archive,
                    "--progress", "none")
            check(r.returncode == 0 and r.stderr == "", "worker run: %d %r" % (r.returncode,
                                                                              r.stderr))
            done = pg.psql("archive", "SELECT count(*) FROM vidfeat.extractions WHERE status ="
                           " 'done'").strip()
            check(done == "2", "done extractions: %s" % done)
            for args in (["info", worker], ["export", worker, "--format", "csv"]):
                r = run(*args)
                check(r.returncode == 0 and r.stderr == "", "%s: %r" % (args[0], r.stderr))
            print("ok the worker role does a whole queue run and reads it back (info, export)")

            check_reader(exe, env, pg, archive, as_role, readme)

            pg.psql("archive", "CREATE SCHEMA other; CREATE TABLE other.secrets (x int)")
            for sql in ("DROP TABLE features", "TRUNCATE features", "CREATE TABLE mine (x int)",
                        "ALTER TABLE features ADD COLUMN y int", "SELECT * FROM other.secrets",
                        "INSERT INTO queue (path) VALUES ('x.mp4')", "DELETE FROM queue",
                        "CREATE TABLE public.mine (x int)"):
                r = as_role("vidfeat_worker", sql)
                check(r.returncode != 0 and ("permission denied" in r.stderr or
                                             "must be owner" in r.stderr),
                      "the worker could: %s (%r)" % (sql, r.stderr))
            r = run("enqueue", "-o", worker, "--root", archive, archive)
            check(r.returncode == 3 and "registering work: permission denied for table queue: "
                  "the role vidfeat_worker lacks that grant" in r.stderr,
                  "worker enqueue: %r" % r.stderr)
            print("ok the worker role cannot drop, truncate, create, alter, enqueue or read "
                  "another schema")

            pg.psql("archive", "REVOKE INSERT ON vidfeat.features FROM vidfeat_worker")
            r = run("--model", model, "--max-frames", "6", "-o", worker, "--root", archive,
                    "--force", "--progress", "none", os.path.join(archive, "testsrc_64x48.mp4"))
            line = [l for l in r.stderr.splitlines() if "permission denied" in l]
            check(r.returncode == 1 and len(line) == 1 and r.stderr.count("\n") == 1 and
                  "permission denied for table features: the role vidfeat_worker lacks that "
                  "grant (docs/archives.md \"PostgreSQL roles\"" in line[0] and
                  line[0].startswith("vidfeat: %s: " % worker), "revoked: %d %r" % (
                      r.returncode, r.stderr))
            print("ok a grant taken away: one line naming the table, the role and the docs")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
