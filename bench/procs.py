"""bench/procs: the child processes of the Python benches (rebalance, scaleout, redteam).

Every process started with spawn() is killed when the bench exits, however it exits
(install() once in main(): at exit, on SIGTERM and on SIGINT), so no worker, trainer
or CPU hog outlives a bench that failed or was interrupted.
"""
import atexit
import signal
import subprocess
import sys

CHILDREN = []  # every Popen started by spawn(), killed at exit


def kill_children():
    """Kills (SIGKILL) and reaps every child still running."""
    for p in CHILDREN:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired, ChildProcessError):
                pass


def on_signal(signum, _frame):
    kill_children()
    sys.exit(128 + signum)


def install():
    """Kill the children at exit, on SIGTERM and on SIGINT (exit status 128 + signal)."""
    atexit.register(kill_children)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def spawn(cmd, **kw):
    """subprocess.Popen(cmd, **kw), remembered so that kill_children() kills it."""
    p = subprocess.Popen(cmd, **kw)
    CHILDREN.append(p)
    return p


def pin(core):
    """The taskset prefix running a command on `core` (a CPU list, e.g. "0" or "1,3");
    none for "none" or None."""
    return [] if core in (None, "none") else ["taskset", "-c", str(core)]


def loadavg():
    """The 1, 5 and 15 minute load averages."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]
