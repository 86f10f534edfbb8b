#!/usr/bin/env python3
"""bench/rebalance: hybrid decode with and without rebalancing, one run of each.

    python3 bench/rebalance.py [--brigade build/launch/brigade] [--data DIR] [--epochs 15]
                               [--batch-size 16] [--interval 2] [--configs without,with]

Real processes on 127.0.0.1, launched as torchrun launches them (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT): 4 ranks of `brigade run --threads 1 --decode hybrid
--directory auto --stats auto`; 2 shared `brigade worker --threads 1 --join`; CPU hogs
(busy loops, --hogs, default 3) pinned with taskset to rank 2's core (core 2 mod
cores) for the whole run. On this 2-core machine every rank cannot have a core of its
own, and the scheduler shares a core evenly among what runs on it, so: rank 2, the
hogs and worker 0 on the hog's core; ranks 0, 1, 3 and worker 1 on the other cores.
With one hog rank 2 had more CPU than the others (a half core against a fifth; its
rate was the highest), with 3 it has about 4/5 of theirs. Measured: pinned to rank
mod cores with one hog, or unpinned but for rank 2 and the hog, the ranks' rates
were within 1.07 without rebalancing: the slowed rank did not stand out. Configuration "without": the workers serve the
ranks' sessions in turn; "with": rank 0 has `--rebalance` (launch/loader/job.h
REBALANCING): the workers serve the rank that falls behind first.

One JSON line per configuration on stdout: each rank's samples/s (its JSON summary's,
after its first batch), the spread (max / min; the issue's goal with rebalancing is
<= 1.15), the seconds until every rank had finished its epochs (what a synchronous
training job waits for: from the launch to the last rank's exit), each rank's share
decoded here (hybrid's local slots) and on the workers, rank 0's last weights, and the
load average before and after (the machine is shared: the figures move with it).
Every process this script starts is killed when it exits, however it exits.
"""
import argparse
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

CHILDREN = []
TOKEN = "rebalance-bench-token"


def kill_children():
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


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    CHILDREN.append(p)
    return p


def free_master_port():
    """MASTER_PORT such that it, + 1 (the directory) and + 2 (the statistics) are free now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + 2 > 65535:
            continue
        try:
            socks = []
            for p in (base, base + 1, base + 2):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            for s in socks:
                s.close()
            return base
        except OSError:
            for s in socks:
                s.close()
    raise SystemExit("rebalance: no three free ports in a row")


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def run(args, rebalance, folder):
    cores = os.cpu_count() or 1
    master = free_master_port()
    env = dict(os.environ, BRIGADE_TOKEN=TOKEN, WORLD_SIZE="4", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(master))
    hog_core = 2 % cores
    others = ",".join(str(c) for c in range(cores) if c != hog_core or cores == 1)
    hogs = [spawn(["taskset", "-c", str(hog_core), sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    load_before = loadavg()
    workers = []
    for w in range(2):
        err = open(os.path.join(folder, f"worker{w}-{int(rebalance)}.txt"), "w")
        core = str(hog_core) if w == 0 else others
        workers.append(spawn(["taskset", "-c", core, args.brigade, "worker", "--threads", "1", "--join",
                              f"127.0.0.1:{master + 1}"], env=env, stdout=subprocess.PIPE,
                             stderr=err, text=True))
    for w in workers:
        w.stdout.readline()  # its address: it listens
    started = time.monotonic()
    ranks = []
    for rank in range(4):
        pin = ["taskset", "-c", str(hog_core) if rank == 2 else others]
        cmd = pin + [args.brigade, "run", "--threads", "1",
               "--decode", "hybrid", "--directory", "auto", "--stats", "auto",
               "--stats-interval", str(args.interval), "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--json", "--no-progress"]
        if args.data:
            cmd += ["--data", args.data]
        if rebalance and rank == 0:
            cmd += ["--rebalance"]
        err = open(os.path.join(folder, f"rank{rank}-{int(rebalance)}.txt"), "w")
        ranks.append(spawn(cmd, env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                           stderr=err, text=True))
    finished = [None] * 4
    outs = [None] * 4
    while None in finished:
        for r, p in enumerate(ranks):
            if finished[r] is None and p.poll() is not None:
                finished[r] = time.monotonic() - started
                outs[r] = p.stdout.read()
        time.sleep(0.05)
    load_after = loadavg()
    for p in workers + hogs:
        p.kill()
        p.wait()
    summaries = []
    for r, (p, out) in enumerate(zip(ranks, outs)):
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            with open(os.path.join(folder, f"rank{r}-{int(rebalance)}.txt")) as f:
                tail = f.read()[-2000:]
            raise SystemExit(f"rebalance: rank {r} exited with {p.returncode}:\n{tail}")
        summaries.append(json.loads(lines[-1]))
    rates = [s["samples_per_s"] for s in summaries]
    remote = [s.get("remote", {}) for s in summaries]
    return {
        "bench": "rebalance",
        "config": "with" if rebalance else "without",
        "samples_per_s": [round(x, 1) for x in rates],
        "spread": round(max(rates) / min(rates), 3),
        "all_ranks_done_s": round(max(finished), 2),
        "rank_done_s": [round(x, 2) for x in finished],
        "decoded_here": [r.get("decoded_here") for r in remote],
        "remote_tasks": [r.get("tasks") for r in remote],
        "weights": remote[0].get("rank_weights"),
        "hog_core": hog_core,
        "hogs": args.hogs,
        "cores": cores,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brigade", default="build/launch/brigade")
    ap.add_argument("--data", help="folder of images (default: the demo dataset)")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--interval", type=float, default=2.0, help="--stats-interval, seconds")
    ap.add_argument("--configs", default="without,with")
    ap.add_argument("--hogs", type=int, default=3, help="busy loops on rank 2's core")
    args = ap.parse_args()
    atexit.register(kill_children)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    folder = tempfile.mkdtemp(prefix="brigade-rebalance-")
    for config in args.configs.split(","):
        row = run(args, config == "with", folder)
        print(json.dumps(row), flush=True)
        print(f"{row['config']:>8}: samples/s {row['samples_per_s']} spread {row['spread']} "
              f"all done {row['all_ranks_done_s']} s (load {row['loadavg_before'][0]:.1f} -> "
              f"{row['loadavg_after'][0]:.1f})", file=sys.stderr)
    print(f"logs in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
