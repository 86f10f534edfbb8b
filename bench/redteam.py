#!/usr/bin/env python3
"""bench/redteam: issue 21's two bad-luck scenarios as loops on this machine (not CI).

    python3 bench/redteam.py double-kill [--runs 60] [--brigade build/launch/brigade]
    python3 bench/redteam.py hung-read [--runs 10] [--hung-fs build/tests/launch/hung_fs]

double-kill: three `brigade worker` processes and a trainer (`brigade run` on the demo
  dataset, --on-no-workers fail); once all three are live and a random 0.3-1.5 s later,
  two of them are SIGKILLed together. A run passes when the trainer exits 0 having
  delivered every sample with none failed (no innocent failure).
hung-read: a FUSE file system whose file's reads never return (tests/launch/hung_fs.cc)
  at position 49 of a 401-line list, three workers, --task-timeout 3, --max-attempts 2.
  A run passes when the trainer exits 0 with exactly one failed sample, the hung file,
  named "lost on 2 attempts", and the other 400 delivered.

One JSON line per run and a summary line on stdout. Every process it starts is killed
when it exits, however it exits.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

from procs import install, spawn


def start_workers(args, n, log):
    workers = []
    for _ in range(n):
        p = spawn([args.brigade, "worker"] + args.worker_args, stdout=subprocess.PIPE, stderr=log, text=True)
        address = p.stdout.readline().strip()
        if not re.fullmatch(r"[\w.\-]+:\d+", address):
            raise SystemExit(f"redteam: a worker printed {address!r}, not HOST:PORT")
        workers.append((p, address))
    return workers


class Trainer:
    def __init__(self, args, cmd):
        self.proc = spawn([args.brigade, "run"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines, self.out = [], []
        self.cond = threading.Condition()
        self.err_reader = threading.Thread(target=self._read, daemon=True)
        self.err_reader.start()
        self.out_reader = threading.Thread(target=lambda: self.out.extend(self.proc.stdout), daemon=True)
        self.out_reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line.rstrip())
                self.cond.notify_all()

    def wait_lines(self, pattern, count, timeout=60):
        deadline = time.time() + timeout
        with self.cond:
            while sum(1 for l in self.lines if re.search(pattern, l)) < count:
                if not self.err_reader.is_alive() or time.time() > deadline:
                    return False
                self.cond.wait(0.2)
        return True

    def finish(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, "timed out"
        self.err_reader.join()
        self.out_reader.join()
        try:
            return json.loads(self.out[-1]), None
        except (IndexError, json.JSONDecodeError):
            return None, "no JSON summary"


def double_kill(args, i, log):
    workers = start_workers(args, 3, log)
    try:
        t = Trainer(args, ["--workers", ",".join(a for _, a in workers), "--json", "--no-progress",
                           "--on-no-workers", "fail", "--epochs", "1", "--batch-size", str(args.batch_size)])
        if not t.wait_lines(r"worker .* is live", 3):
            return {"run": i, "ok": False, "why": "three workers never live", "log": t.lines[-5:]}
        time.sleep(random.uniform(0.3, 1.5))
        victims = random.sample(workers, 2)
        for p, _ in victims:
            os.kill(p.pid, signal.SIGKILL)
        summary, why = t.finish(args.timeout)
    finally:
        for p, _ in workers:
            if p.poll() is None:
                p.kill()
                p.wait()
    row = {"run": i, "scenario": "double-kill", "victims": [a for _, a in victims], "rc": t.proc.returncode}
    if summary is None:
        return dict(row, ok=False, why=why, log=t.lines[-5:])
    row.update(samples=summary["samples"], failed=summary["failed"],
               redispatched=summary["remote"]["redispatched"])
    row["ok"] = t.proc.returncode == 0 and summary["failed"] == 0 and summary["samples"] == args.expect
    if not row["ok"]:
        row["log"] = [l for l in t.lines if "fail" in l or "lost" in l][-8:]
    return row


def demo_files(data):
    out = []
    for root, _, files in os.walk(data):
        out += [os.path.join(root, f) for f in files if f.endswith(".jpg")]
    return sorted(out)


def hung_read(args, i, log):
    tmp = tempfile.mkdtemp(prefix="brigade-redteam-")
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    fs = spawn([args.hung_fs, mnt, os.path.join(tmp, "read-started")], stdout=log, stderr=log)
    workers = []
    try:
        deadline = time.time() + 5
        while not os.path.exists(os.path.join(mnt, "hung.jpg")):
            if time.time() > deadline or fs.poll() is not None:
                raise SystemExit("redteam: cannot mount the hung file system (FUSE)")
            time.sleep(0.05)
        files = demo_files(args.data)[:400]
        files.insert(49, os.path.join(mnt, "hung.jpg"))
        with open(os.path.join(tmp, "list.txt"), "w") as f:
            f.write("\n".join(files) + "\n")
        workers = start_workers(args, 3, log)
        t = Trainer(args, ["--list", os.path.join(tmp, "list.txt"), "--workers", ",".join(a for _, a in workers),
                           "--json", "--no-progress", "--on-no-workers", "fail", "--epochs", "1",
                           "--batch-size", str(args.batch_size), "--task-timeout", "3", "--max-attempts", "2"])
        summary, why = t.finish(args.timeout)
    finally:
        fs.kill()  # first: the workers' blocked reads end (ENOTCONN), so they can exit
        fs.wait()
        for p, _ in workers:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    row = {"run": i, "scenario": "hung-read", "rc": t.proc.returncode}
    if summary is None:
        return dict(row, ok=False, why=why, log=t.lines[-5:])
    named = [l for l in t.lines if "hung.jpg" in l and "lost on 2 attempts" in l]
    row.update(samples=summary["samples"], failed=summary["failed"], poison_named=bool(named),
               innocent_failed=summary["failed"] - (1 if named else 0))
    row["ok"] = t.proc.returncode == 0 and summary["failed"] == 1 and bool(named) and summary["samples"] == 400
    if not row["ok"]:
        row["log"] = [l for l in t.lines if "fail" in l or "lost" in l][-8:]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["double-kill", "hung-read"])
    ap.add_argument("--runs", type=int, default=0, help="default: 60 double kills, 10 hung reads")
    ap.add_argument("--brigade", default="build/launch/brigade")
    ap.add_argument("--hung-fs", default="build/tests/launch/hung_fs")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=180, help="seconds a trainer may take")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.runs = args.runs or (60 if args.scenario == "double-kill" else 10)
    args.worker_args = ["--threads", "1"] if args.scenario == "double-kill" else []
    random.seed(args.seed)
    install()
    os.environ.setdefault("BRIGADE_TOKEN", os.urandom(16).hex())
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    args.data = os.path.join(cache, "brigade", "demo", "images")
    args.expect = len(demo_files(args.data))
    log = open(f"/tmp/brigade-redteam-{args.scenario}-{os.getpid()}.log", "w")
    run = double_kill if args.scenario == "double-kill" else hung_read
    passed = 0
    innocent = 0
    for i in range(args.runs):
        row = run(args, i, log)
        passed += row["ok"]
        innocent += row.get("innocent_failed", row.get("failed", 0) if args.scenario == "double-kill" else 0)
        print(json.dumps(row), flush=True)
    print(json.dumps({"scenario": args.scenario, "runs": args.runs, "passed": passed,
                      "innocent_failed_samples": innocent}), flush=True)
    sys.exit(0 if passed == args.runs else 1)


if __name__ == "__main__":
    main()
