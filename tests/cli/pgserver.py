"""A real PostgreSQL server for a test: initdb and pg_ctl in a temporary directory, listening on
127.0.0.1 at a free port, run as the unprivileged "postgres" user when the test runs as root
(initdb refuses root). Stopped, by its pid, when the with-block ends.

    with PgServer() as pg:        # raises Unavailable when PostgreSQL's programs are absent
        uri = pg.uri("vf")        # a new database vf
        pg.psql("vf", "SELECT 1") # its output
"""
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class Unavailable(Exception):
    pass


def _bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    raise Unavailable("PostgreSQL's initdb is not installed (apt-get install postgresql-15)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self):
        self.bin = _bindir()
        self.tmp = tempfile.mkdtemp(prefix="vidfeat_pg_")
        self.data = os.path.join(self.tmp, "data")
        self.port = _free_port()
        self.pid = None
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres"
            shutil.chown(self.tmp, user="postgres")
            os.chmod(self.tmp, 0o755)

    def _cmd(self, *args):
        return (["runuser", "-u", self.user, "--"] if self.user else []) + list(args)

    def _run(self, *args, **kw):
        return subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=120, **kw)

    def __enter__(self):
        r = self._run(os.path.join(self.bin, "initdb"), "-D", self.data, "-A", "trust",
                      "-U", "postgres", "--no-sync")
        if r.returncode != 0:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise RuntimeError("initdb: " + r.stderr)
        self.start()
        return self

    def start(self):
        opts = "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (self.port, self.tmp)
        r = self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-o", opts,
                      "-l", os.path.join(self.tmp, "log"), "-w", "-t", "60", "start")
        if r.returncode != 0:
            raise RuntimeError("pg_ctl start: %s %s" % (r.stdout, r.stderr))
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def stop(self):
        if self.pid:
            self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate",
                      "-w", "-t", "30", "stop")
            try:  # still there: by its pid
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None

    def restart(self):
        """Stop (fast: clients are disconnected) and start again on the same port."""
        self._run(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "-t",
                  "60", "stop")
        self.pid = None
        self.start()

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def psql(self, db, sql):
        r = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", db, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1",
                            "-c", sql], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("psql: " + r.stderr)
        return r.stdout

    def uri(self, db, password=None):
        """A new database db; its libpq URI (with a password when given: trust ignores it)."""
        self.psql("postgres", "CREATE DATABASE %s" % db)
        auth = "postgres:%s@" % password if password else "postgres@"
        return "postgresql://%s127.0.0.1:%d/%s" % (auth, self.port, db)
