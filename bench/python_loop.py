#!/usr/bin/env python3
"""bench/python_loop: a PyTorch loop over brigade.Loader vs the same loop over PyTorch's
DataLoader (0, 1, 2 workers), and vs `brigade run`, on the same files, in one run.

    /usr/bin/python3 bench/python_loop.py [--data DIR] [--module build/python]
                                          [--brigade build/launch/brigade]
                                          [--epochs N] [--repeat N] [--workers 0,1,2]

Every loader hands out uint8 NCHW batches of 32 (shorter side 256, center crop 224),
shuffled, and the loop does the same small step on each batch (it reads a strided
sample of the pixels, as a model's first touch would). PyTorch: a map-style Dataset
decoding with PIL, Resize(256) + CenterCrop(224) + PILToTensor (bench/e2e.py's).
Brigade: brigade.Loader(list=..., layout="nchw", threads=N), torch tensors through
DLPack. The figures are bench/e2e.py's (its measure(): each loader in a child process;
steady samples/s after the first batch, CPU ms per sample of the process tree, peak
PSS of the tree sampled every 100 ms, time to the first batch), one JSON line per
loader on stdout and a table on stderr; the Python loop's row adds
`loop_cpu_ms_per_sample`, its process's CPU from the start of the loop to its end
(without the interpreter's and torch's imports, ~2 s of CPU), to set against `brigade
run`'s whole-process figure (`ratio_loop_cpu_vs_brigade_run`). `ratio_rate_vs_brigade_run`
is the Python loop's rate over `brigade run`'s (the binding's cost; target >= 0.95); both
run --repeat times, alternating, and each row is its median run;
`ratio_rate_vs_brigade_run_paired_median` is the median of each loop's rate over the
`brigade run` just before it.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e import PYTHON, ensure_packages, measure  # noqa: E402


def step(batch):
    """The loop's work on one batch, the same for every loader."""
    return int(batch[:, :, ::32, ::32].sum())


def child(args):
    t_start = float(args.t0)
    import torch
    # The loop's own torch work on one thread, as in bench/e2e.py: torch's intra-op
    # threads would otherwise spin beside the loader's (2 cores).
    torch.set_num_threads(1)
    files = [line for line in open(args.list_file).read().splitlines() if line]
    if args.loader == "brigade":
        sys.path.insert(0, args.module)
        import brigade
        loader = brigade.Loader(list=args.list_file, batch_size=32, layout="nchw", seed=0,
                                threads=args.threads, epochs=args.epochs, environment={})
        batches = (b["data"] for _ in range(args.epochs) for b in loader)
    else:
        from PIL import Image
        from torch.utils.data import DataLoader, Dataset
        from torchvision import transforms
        tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                 transforms.PILToTensor()])

        class Images(Dataset):
            def __len__(self):
                return len(files)

            def __getitem__(self, i):
                with Image.open(files[i]) as im:
                    return tf(im.convert("RGB"))
        data_loader = DataLoader(Images(), batch_size=32, shuffle=True, num_workers=args.workers,
                                 persistent_workers=args.workers > 0,
                                 generator=torch.Generator().manual_seed(0))
        batches = (b for _ in range(args.epochs) for b in data_loader)
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF)  # after the imports (torch: ~2 s of CPU)
    first = last = None
    samples = first_n = checksum = 0
    for b in batches:
        checksum += step(b)
        now = time.time()
        if first is None:
            first, first_n = now, len(b)
        samples += len(b)
        last = now
    rate = (samples - first_n) / (last - first) if last > first else 0
    after = resource.getrusage(resource.RUSAGE_SELF)
    loop_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = {"samples": samples, "samples_per_s": rate, "time_to_first_batch_s": first - t_start,
           "checksum": checksum}
    if args.loader == "brigade" and args.loop_out:
        # e2e.measure() keeps its own fields only: this one goes through a file.
        with open(args.loop_out, "w") as f:  # DataLoader's workers are other processes
            f.write(str(1000 * loop_cpu / max(1, samples)))
    print(json.dumps(out))


def median(results):
    """The result with the median rate."""
    return sorted(results, key=lambda r: r["samples_per_s"])[len(results) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder of images (default: the demo dataset)")
    ap.add_argument("--module", default="build/python", help="folder holding the brigade package")
    ap.add_argument("--brigade", default="build/launch/brigade")
    ap.add_argument("--workers", default="0,1,2", help="DataLoader num_workers to measure")
    ap.add_argument("--threads", type=int, default=2, help="Brigade's CPU threads")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs over the files for every loader (longer runs: steadier rates)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of `brigade run` and of the Python loop, alternating; each row "
                         "is the run with the median rate (a shared machine is noisy)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--loader", help=argparse.SUPPRESS)
    ap.add_argument("--list-file", help=argparse.SUPPRESS)
    ap.add_argument("--t0", help=argparse.SUPPRESS)
    ap.add_argument("--loop-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.workers = int(args.workers)
        return child(args)
    ensure_packages()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    data = args.data or os.path.join(cache, "brigade", "demo", "images")
    exts = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs
                   if f.lower().endswith(exts))
    if not files:
        raise SystemExit(f"python_loop: no images under {data} (run `brigade run` once to "
                         "generate the demo dataset)")
    list_file = f"/tmp/brigade-python-loop-{os.getpid()}.txt"
    with open(list_file, "w") as f:
        f.write("\n".join(files) + "\n")
    me = [PYTHON, os.path.abspath(__file__), "--child", "--list-file", list_file, "--t0", "{t0}",
          "--module", os.path.abspath(args.module), "--threads", str(args.threads),
          "--epochs", str(args.epochs)]
    try:
        cli = [args.brigade, "run", "--list", list_file, "--json", "--no-progress", "--layout",
               "nchw", "--threads", str(args.threads), "--epochs", str(args.epochs)]
        runs, loops = [], []
        loop_out = list_file + ".loop-cpu"
        for _ in range(max(1, args.repeat)):
            runs.append(measure(cli))
            loops.append(measure(me + ["--loader", "brigade", "--workers", "0", "--loop-out",
                                       loop_out]))
            with open(loop_out) as f:
                loops[-1]["loop_cpu_ms_per_sample"] = float(f.read())
            os.unlink(loop_out)
        rows = [{"loader": "brigade run", **median(runs)},
                {"loader": "brigade.Loader (Python)", **median(loops)}]
        rows[1]["rates_of_runs"] = [r["samples_per_s"] for r in loops]
        rows[0]["rates_of_runs"] = [r["samples_per_s"] for r in runs]
        for w in [int(x) for x in args.workers.split(",") if x.strip()]:
            rows.append({"loader": f"DataLoader {w} workers",
                         **measure(me + ["--loader", "torch", "--workers", str(w)])})
    finally:
        os.unlink(list_file)
    run, py = rows[0], rows[1]
    py["ratio_rate_vs_brigade_run"] = py["samples_per_s"] / run["samples_per_s"]
    # Each Python loop against the `brigade run` just before it (the machine's state
    # moves between runs more than between neighbours), and CPU after the imports.
    pairs = sorted(p / r for p, r in zip(py["rates_of_runs"], run["rates_of_runs"]))
    py["ratio_rate_vs_brigade_run_paired_median"] = pairs[len(pairs) // 2]
    py["ratio_loop_cpu_vs_brigade_run"] = py["loop_cpu_ms_per_sample"] / run["cpu_ms_per_sample"]
    torch_rows = rows[2:]
    if torch_rows:
        best = max(torch_rows, key=lambda r: r["samples_per_s"])
        py["best_dataloader"] = best["loader"]
        py["ratio_rate_vs_best_dataloader"] = py["samples_per_s"] / best["samples_per_s"]
        py["ratio_cpu_vs_best_dataloader"] = py["cpu_ms_per_sample"] / best["cpu_ms_per_sample"]
        py["ratio_pss_vs_best_dataloader"] = py["peak_pss_mb"] / best["peak_pss_mb"]
    for r in rows:
        print(json.dumps({"bench": "python_loop", "images": len(files), **r}))
    print(f"{'loader':<26}{'samples/s':>10}{'cpu ms/sample':>15}{'peak PSS MB':>13}"
          f"{'first batch s':>15}", file=sys.stderr)
    for r in rows:
        print(f"{r['loader']:<26}{r['samples_per_s']:>10.1f}{r['cpu_ms_per_sample']:>15.2f}"
              f"{r['peak_pss_mb']:>13.1f}{r['time_to_first_batch_s']:>15.3f}", file=sys.stderr)
    print(f"brigade.Loader vs brigade run: rate {py['ratio_rate_vs_brigade_run']:.3f}x (target "
          f">= 0.95); the loop's CPU after the imports {py['loop_cpu_ms_per_sample']:.2f} ms "
          f"per sample vs brigade run's {run['cpu_ms_per_sample']:.2f} "
          f"({py['ratio_loop_cpu_vs_brigade_run']:.3f}x); paired runs' median rate ratio "
          f"{py['ratio_rate_vs_brigade_run_paired_median']:.3f}x", file=sys.stderr)
    if torch_rows:
        print(f"brigade.Loader vs best DataLoader ({py['best_dataloader']}): rate "
              f"{py['ratio_rate_vs_best_dataloader']:.2f}x, CPU/sample "
              f"{py['ratio_cpu_vs_best_dataloader']:.2f}x, peak PSS "
              f"{py['ratio_pss_vs_best_dataloader']:.2f}x", file=sys.stderr)


if __name__ == "__main__":
    main()
