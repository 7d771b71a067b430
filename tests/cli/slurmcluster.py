"""A real one-node Slurm cluster for a test: munged, slurmctld and slurmd with a generated
configuration in a temporary directory (its own munge key and socket, free ports on 127.0.0.1,
no cgroups, no accounting), run as root. Jobs are cancelled and the three daemons stopped, by
their pids, when the with-block ends.

    with SlurmCluster() as slurm:      # raises Unavailable when Slurm or munge is absent
        slurm.run("sbatch", "--wait", "job.sbatch")   # a client command against this cluster
        slurm.env                      # the environment those commands need (SLURM_CONF)
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


class Unavailable(Exception):
    pass


def _program(name):
    for d in (None, "/usr/sbin", "/sbin"):
        p = shutil.which(name, path=d)
        if p:
            return p
    raise Unavailable("%s is not installed (apt-get install slurm-wlm munge)" % name)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """\
ClusterName=vidfeat-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={tmp}/munge.socket
CredType=cred/munge
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=10
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    def __init__(self):
        if os.geteuid() != 0:
            raise Unavailable("a Slurm cluster's slurmd runs as root; run the test as root")
        self.prog = {p: _program(p) for p in PROGRAMS}
        self.host = socket.gethostname().split(".")[0]
        self.tmp = None
        self.procs = {}

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="vidfeat_slurm_")
        os.chmod(self.tmp, 0o755)  # munged wants its socket's directory searchable by all
        for d in ("state", "spool"):
            os.mkdir(os.path.join(self.tmp, d))
        key = os.path.join(self.tmp, "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(os.urandom(128))
        conf = os.path.join(self.tmp, "slurm.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(host=self.host, tmp=self.tmp, ctld_port=_free_port(),
                                slurmd_port=_free_port(), cpus=os.cpu_count() or 1))
        self.env = dict(os.environ, SLURM_CONF=conf)
        try:
            self._start("munged", "-F", "-f", "--socket=" + self._path("munge.socket"),
                        "--key-file=" + key, "--pid-file=" + self._path("munged.pid"),
                        "--log-file=" + self._path("munged.log"),
                        "--seed-file=" + self._path("munged.seed"))
            self._wait(lambda: os.path.exists(self._path("munge.socket")), "munged's socket")
            self._start("slurmctld", "-D", "-i")
            self._start("slurmd", "-D", "-N", self.host)
            self._wait(self._idle, "the node to be idle (sinfo)")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _path(self, name):
        return os.path.join(self.tmp, name)

    def _start(self, name, *args):
        log = open(self._path(name + ".out"), "w")
        self.procs[name] = subprocess.Popen([self.prog[name], *args], stdout=log,
                                            stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        log.close()

    def _wait(self, cond, what, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%d): %s" % (name, p.returncode,
                                                                self.logs()))
            if cond():
                return
            time.sleep(0.1)
        raise RuntimeError("timed out waiting for %s: %s" % (what, self.logs()))

    def _idle(self):
        r = self.run("sinfo", "-h", "-o", "%T", check=False)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def run(self, cmd, *args, check=True, timeout=120):
        """A Slurm client command against this cluster; its CompletedProcess (text)."""
        r = subprocess.run([self.prog.get(cmd, cmd), *args], capture_output=True, text=True,
                           env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (cmd, r.returncode, r.stderr.strip()))
        return r

    def jobs(self):
        """The ids of the jobs (array tasks too) the cluster still has."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def logs(self):
        out = []
        for name in ("munged.out", "slurmctld.out", "slurmd.out"):
            try:
                with open(self._path(name)) as f:
                    out.append("--- %s\n%s" % (name, "".join(f.readlines()[-15:])))
            except OSError:
                pass
        return "\n".join(out)

    def __exit__(self, *exc):
        if "slurmd" in self.procs and self.procs["slurmd"].poll() is None:
            # jobs first (their steps are slurmd's), while the daemons can still end them
            self.run("scancel", "--full", "--user=root", check=False)
            t0 = time.time()
            while time.time() - t0 < 30 and self.run("squeue", "-h", check=False).stdout:
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()  # by its pid, never left behind
                    p.wait()
        self.procs = {}
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
