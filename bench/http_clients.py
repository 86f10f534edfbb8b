#!/usr/bin/env python3
"""bench/http_clients: the storage client's pool of blocking curl handles against curl's
multi interface (issue 25 item 2: "measure which"), in one run.

    python3 bench/http_clients.py [--bench build/bench/bench_http] [--latencies 0,20,100]
                                  [--in-flight 8,32,128] [--requests 1500]

The object is the S3 fixture's 3 MiB big.bin (s3rver from npm behind the fixture's
proxy, tests/transport/storage/s3_fixture.py), read as unsigned 64 KiB ranges at random
offsets, as a shard's members are; the proxy adds each --latencies value per request.
One JSON line per (latency, client, requests in flight), from build/bench/bench_http:
requests/s, CPU microseconds per request (the client process's, every thread: what the
machine's load hardly moves) and the client's threads, plus the 1-minute load average.
The proxy is Python: its rate caps both clients alike; CPU per request is the client's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from object_storage import Fixture

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench", "bench_http"))
    ap.add_argument("--latencies", default="0,20,100", help="ms added per request")
    ap.add_argument("--in-flight", default="8,32,128")
    ap.add_argument("--requests", type=int, default=1500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="brigade-http-bench-") as tmp:
        os.makedirs(os.path.join(tmp, "mirror"))
        os.makedirs(os.path.join(tmp, "up"))
        fixture = Fixture(os.path.join(tmp, "mirror"), os.path.join(tmp, "up"))
        try:
            url = f"{fixture.values['proxy']}/{fixture.values['bucket']}/big.bin"
            size = os.path.getsize(os.path.join(tmp, "mirror", "big.bin"))
            for latency in [int(x) for x in args.latencies.split(",")]:
                fixture.command(f"latency {latency}")
                out = subprocess.run([args.bench, "--url", url, "--size", str(size),
                                      "--requests", str(args.requests),
                                      "--in-flight", args.in_flight],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"http_clients: bench_http failed:\n{out.stderr[-2000:]}")
                for line in out.stdout.splitlines():
                    row = json.loads(line)
                    row["latency_ms"] = latency
                    row["load_1min"] = os.getloadavg()[0]
                    print(json.dumps(row), flush=True)
        finally:
            fixture.close()


if __name__ == "__main__":
    main()
