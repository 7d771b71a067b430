"""A `vidfeat serve` process for the tests: started on a free port (--port 0), its address read
from the line it prints, stopped by its pid (SIGTERM, then SIGKILL after a bound)."""
import http.client
import select
import signal
import subprocess
import time
import urllib.error
import urllib.request


class Server:
    def __init__(self, exe, db, *args, cwd=None, env=None):
        self.proc = subprocess.Popen([exe, "serve", db, "--port", "0", *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            self.proc.kill()
            err = self.proc.stderr.read()
            raise RuntimeError("vidfeat serve did not start: %r %s" % (line, err))
        self.printed = line
        self.url = line.split("?")[0].rstrip("/")
        self.token = line.split("?token=")[1] if "?token=" in line else None

    def get(self, path, headers=None, data=None, method=None):
        """(status, headers, body bytes) of one request; redirects are not followed."""
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None
        opener = urllib.request.build_opener(NoRedirect)
        req = urllib.request.Request(self.url + path, data=data, headers=headers or {},
                                     method=method)
        try:
            with opener.open(req, timeout=60) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def start_body(self, path, length, timeout=60):
        """A connection that has POSTed path's headers announcing length bytes, none sent."""
        host, port = self.url[len("http://"):].rsplit(":", 1)
        conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout)
        conn.putrequest("POST", path)
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        return conn

    def announce(self, path, length, timeout=60):
        """POST path announcing a body of length bytes without sending it: the status the server
        answers the headers with (a socket timeout after timeout seconds without one)."""
        conn = self.start_body(path, length, timeout)
        try:
            return conn.getresponse().status
        finally:
            conn.close()

    def stop(self):
        """SIGTERM; (exit status, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()


def wait_until(cond, seconds, step=0.05):
    """True once cond() is; a connection refused or reset on the way (the server still counting
    closed connections against the address) is "not yet"."""
    def holds():
        try:
            return cond()
        except OSError:
            return False
    end = time.time() + seconds
    while time.time() < end:
        if holds():
            return True
        time.sleep(step)
    return holds()
