#!/usr/bin/env python3
"""bench/e2e: `brigade run` against PyTorch's DataLoader on the same files, same run.

    python3 bench/e2e.py [--data DIR | --varied | --video-profile x264-default]
                         [--kind image|video] [--transform eval|train]
                         [--brigade build/launch/brigade] [--repeat N]

Image: a map-style Dataset decoding with PIL, Resize(256) + CenterCrop(224) +
PILToTensor (uint8, as Brigade's batches), batch 32, shuffled, num_workers 0, 1, 2;
against `brigade run --kind image`. Video: PyAV decoding each clip, 8 evenly spaced
frames at 224x224 (shorter side 224, center crop), batch 8, in a DataLoader; against
`brigade run --kind video`. --transform train (images): RandomResizedCrop(224) +
RandomHorizontalFlip() + PILToTensor on PIL ("pytorch-pil-Nw"), and the same
transforms on the uint8 tensors of torchvision.io.decode_jpeg ("pytorch-tvio-Nw"),
against `brigade run --transform train`; bench_decode's row is then --op train224.
With a bench_decode binary (--bench-decode), its native
2-thread decode + eval224 reference row over the same files in memory is measured
in the same run.

For each loader, in a child process of its own: samples/s (steady: samples after the
first batch over the time from first to last batch), CPU seconds per sample (user +
system of the whole process tree), peak memory of the tree (sum of PSS over every
process, workers included, sampled every 100 ms: reading smaps_rollup of a process
with many mappings costs CPU, and sampling at 20 ms cost Brigade a third of its rate), time from process start to the first
batch. One JSON line per configuration on stdout, a table on stderr.

--epochs N runs every loader over the files N times (PyTorch with persistent workers).

Data shaped like users' (instead of the demo set): --varied makes (once) JPEGs of
random sides 300-1200 px and qscale 2-12 (bench/scaleout.py's set); --video-profile
x264-default makes (once, with bench_decode --write) 2 s 640x360 30 fps clips encoded
with x264's defaults (one keyframe per 250 frames, B-pyramid), --clips of them; --photos
makes (once) --photos-count photo-like JPEGs of ~0.19 Mpix at quality 90
(bench/make_photos.py says how).

Needs Debian's python3-torch python3-torchvision python3-pil python3-av; they are
installed on first use (bench/ is not part of CI, so CI does not install them).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

PKGS = ["python3-torch", "python3-torchvision", "python3-pil", "python3-av"]


# Debian's packages install into the system interpreter, not a pyenv/venv one.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def ensure_packages():
    probe = [PYTHON, "-c", "import torch, torchvision, PIL, av"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        print(f"e2e: installing {' '.join(PKGS)}", file=sys.stderr)
        subprocess.check_call(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + PKGS)


# ---- child: the PyTorch loaders ---------------------------------------------

def child_torch(args):
    t_start = float(args.t0)
    import torch
    from torch.utils.data import DataLoader, Dataset
    files = [l for l in open(args.list_file).read().splitlines() if l]

    if args.kind == "image" and args.decoder == "tvio":
        from torchvision import transforms
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        tf = transforms.Compose([transforms.RandomResizedCrop(224, antialias=True),
                                 transforms.RandomHorizontalFlip()])

        class TensorImages(Dataset):
            def __len__(self):
                return len(files)

            def __getitem__(self, i):
                return tf(decode_jpeg(read_file(files[i]), mode=ImageReadMode.RGB))
        ds, batch = TensorImages(), 32
    elif args.kind == "image":
        from PIL import Image
        from torchvision import transforms
        if args.transform == "train":
            tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                     transforms.PILToTensor()])
        else:
            tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])

        class Images(Dataset):
            def __len__(self):
                return len(files)

            def __getitem__(self, i):
                with Image.open(files[i]) as im:
                    return tf(im.convert("RGB"))
        ds, batch = Images(), 32
    else:
        import av
        import numpy as np

        class Clips(Dataset):
            def __len__(self):
                return len(files)

            def __getitem__(self, i):
                with av.open(files[i]) as c:
                    frames = [f for f in c.decode(video=0)]
                n = len(frames)
                picks = [round(k * (n - 1) / 7) for k in range(8)]
                out = []
                for k in picks:
                    f = frames[k]
                    s = 224 / min(f.width, f.height)
                    w, h = max(224, round(f.width * s)), max(224, round(f.height * s))
                    a = f.reformat(width=w, height=h, format="rgb24").to_ndarray()
                    y, x = (h - 224) // 2, (w - 224) // 2
                    out.append(a[y:y + 224, x:x + 224])
                return torch.from_numpy(np.stack(out))
        ds, batch = Clips(), 8
    torch.set_num_threads(1)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=args.workers,
                        persistent_workers=args.workers > 0,
                        generator=torch.Generator().manual_seed(0))
    first = None
    samples = first_n = 0
    for _ in range(args.epochs):
        for b in loader:
            now = time.time()
            if first is None:
                first, first_n = now, len(b)
            samples += len(b)
            last = now
    rate = (samples - first_n) / (last - first) if last > first else 0
    print(json.dumps({"samples": samples, "samples_per_s": rate, "time_to_first_batch_s": first - t_start}))


# ---- parent -------------------------------------------------------------------

def tree_pss_kb(pid):
    """PSS of `pid` and all its descendants, in kB."""
    pids, total = [pid], 0
    while pids:
        p = pids.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    pids += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total


def measure(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.Popen([a.replace("{t0}", repr(t0)) for a in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_pss_kb(proc.pid))
        time.sleep(0.1)
    out = proc.stdout.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"e2e: {' '.join(cmd)} exited with {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"samples": result["samples"], "samples_per_s": result["samples_per_s"],
            "cpu_ms_per_sample": 1000 * cpu / max(1, result["samples"]),
            "peak_pss_mb": peak / 1024, "time_to_first_batch_s": result["time_to_first_batch_s"]}


def median_of(runs):
    """Each numeric field's median over the runs (the first run's for the rest)."""
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = statistics.median(r[k] for r in runs)
    return out


def native_reference(bench_decode, list_file, kind, transform):
    """bench_decode's rows (2 threads, files in memory): its references and load_image."""
    op = ["--op", "train224"] if transform == "train" else []
    out = subprocess.run([bench_decode, "--kind", kind, "--list", list_file, "--threads", "2",
                          "--seconds", "3"] + op, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        rate = next(v for k, v in r.items() if k.endswith("_per_s"))
        cpu = next((v for k, v in r.items() if k.startswith("cpu_ms_per_")), float("nan"))
        rows.append({"loader": f"native-2t {r['impl']} (bench_decode)", "samples_per_s": rate,
                     "cpu_ms_per_sample": cpu})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder of media (default: the demo dataset)")
    ap.add_argument("--kind", choices=["image", "video"], default="image")
    ap.add_argument("--transform", choices=["eval", "train"], default="eval",
                    help="images: the eval (Resize + CenterCrop) or train (RandomResizedCrop + flip) transform")
    ap.add_argument("--decoder", choices=["pil", "tvio"], default="pil", help=argparse.SUPPRESS)
    ap.add_argument("--brigade", default="build/launch/brigade")
    ap.add_argument("--bench-decode", default="build/bench/bench_decode")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--threads", type=int, default=2, help="brigade --threads")
    ap.add_argument("--epochs", type=int, default=0,
                    help="epochs over the files for every loader (default: 1 for images, 8 for "
                         "video, whose 32 demo clips alone are over in a third of a second)")
    ap.add_argument("--varied", action="store_true", help="varied JPEGs (made once)")
    ap.add_argument("--varied-count", type=int, default=400)
    ap.add_argument("--photos", action="store_true",
                    help="photo-like ~0.19 Mpix q90 JPEGs (bench/make_photos.py, made once)")
    ap.add_argument("--photos-count", type=int, default=2000)
    ap.add_argument("--video-profile", choices=["demo", "x264-default"], default="demo",
                    help="x264-default: clips encoded with x264's defaults (made once)")
    ap.add_argument("--clips", type=int, default=32, help="clips made for --video-profile")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run brigade and the native loop N times, alternately, and report the "
                         "median of each (a loaded machine moves single runs by 30%%)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--list-file", help=argparse.SUPPRESS)
    ap.add_argument("--t0", help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args()
    if not args.epochs:
        args.epochs = 1 if args.kind == "image" else 8
    if args.kind == "video" and args.transform != "eval":
        raise SystemExit("e2e: clips take only the eval transform")
    if args.child:
        args.workers = int(args.workers)
        return child_torch(args)
    if any(x.strip() and x != "none" for x in args.workers.split(",")):
        ensure_packages()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    data = args.data or os.path.join(cache, "brigade", "demo", "images" if args.kind == "image" else "videos")
    if args.varied and not args.data:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from scaleout import make_varied
        data = os.path.join(cache, "brigade", "scaleout", "varied")
        make_varied(data, args.varied_count)
    if args.photos and not args.data:
        data = os.path.join(cache, "brigade", f"photos-{args.photos_count}")
        subprocess.run([PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_photos.py"),
                        data, "--count", str(args.photos_count)], check=True)
    if args.kind == "video" and args.video_profile != "demo" and not args.data:
        data = os.path.join(cache, "brigade", "e2e", f"{args.video_profile}-{args.clips}")
        if not os.path.isdir(data) or len(os.listdir(data)) < args.clips:
            print(f"e2e: making {args.clips} {args.video_profile} clips in {data}", file=sys.stderr)
            subprocess.run([args.bench_decode, "--kind", "video", "--video-profile", args.video_profile,
                            "--clips", str(args.clips), "--write", data], check=True)
    exts = (".jpg", ".jpeg", ".png", ".webp", ".bmp") if args.kind == "image" else (".mp4", ".mkv", ".webm", ".avi", ".mov")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs if f.lower().endswith(exts))
    if not files:
        raise SystemExit(f"e2e: no {args.kind} files under {data} (run `brigade run` once to generate the demo)")
    list_file = f"/tmp/brigade-e2e-{os.getpid()}.txt"
    with open(list_file, "w") as f:
        f.write("\n".join(files) + "\n")
    rows = []
    brigade_runs, native_runs = [], []
    for _ in range(max(1, args.repeat)):
        brigade_runs.append(measure([args.brigade, "run", "--kind", args.kind, "--list", list_file, "--json",
                                     "--no-progress", "--threads", str(args.threads), "--epochs",
                                     str(args.epochs), "--transform", args.transform]))
        if os.path.exists(args.bench_decode):
            native_runs.append(native_reference(args.bench_decode, list_file, args.kind, args.transform))
    b = median_of(brigade_runs)
    rows.append({"loader": "brigade", **b, "runs": len(brigade_runs)})
    decoders = ["pil", "tvio"] if args.transform == "train" else ["pil"]
    for decoder in decoders:
        for w in [int(x) for x in args.workers.split(",") if x.strip() and x != "none"]:
            r = measure([PYTHON, os.path.abspath(__file__), "--child", "--kind", args.kind, "--workers", str(w),
                         "--list-file", list_file, "--t0", "{t0}", "--epochs", str(args.epochs),
                         "--transform", args.transform, "--decoder", decoder])
            name = f"pytorch-{w}w" if args.transform == "eval" else f"pytorch-{decoder}-{w}w"
            rows.append({"loader": name, **r})
    if native_runs:
        for k, row in enumerate(native_runs[0]):
            rows.append({**median_of([run[k] for run in native_runs]), "loader": row["loader"],
                         "runs": len(native_runs)})
    os.unlink(list_file)
    torch_rows = [r for r in rows if r["loader"].startswith("pytorch")]
    best = max(torch_rows, key=lambda r: r["samples_per_s"]) if torch_rows else None
    b = rows[0]
    if best:
        b["ratio_rate_vs_best_pytorch"] = b["samples_per_s"] / best["samples_per_s"]
        b["ratio_cpu_vs_best_pytorch"] = b["cpu_ms_per_sample"] / best["cpu_ms_per_sample"]
        b["ratio_pss_vs_best_pytorch"] = b["peak_pss_mb"] / best["peak_pss_mb"]
    # The pipeline's overhead: brigade run against media's own 2-thread decode loop over
    # the same files held in memory: the row that runs what `brigade run` runs (images:
    # media/transform.h's load_transformed, bench_decode's "brigade-transform" row; clips:
    # load_video, its "brigade" row).
    native = [r for r in rows if r["loader"] == "native-2t brigade (bench_decode)"]
    if args.kind == "image":
        native = [r for r in rows if r["loader"].startswith("native-2t brigade-transform")]
    if args.transform == "train":
        native = [r for r in rows if r["loader"].startswith("native-2t brigade-roi")]
    if native:
        b["ratio_rate_vs_native_decode_loop"] = b["samples_per_s"] / native[0]["samples_per_s"]
        # CPU per sample holds where rates do not: on a loaded machine the scheduler gives
        # brigade's threads and bench_decode's two different shares of the cores.
        b["ratio_cpu_vs_native_decode_loop"] = b["cpu_ms_per_sample"] / native[0]["cpu_ms_per_sample"]
    for r in rows:
        print(json.dumps({"kind": args.kind, "transform": args.transform, **r}))
    print(f"{'loader':<26}{'samples/s':>10}{'cpu ms/sample':>15}{'peak PSS MB':>13}{'first batch s':>15}", file=sys.stderr)
    for r in rows:
        print(f"{r['loader']:<26}{r['samples_per_s']:>10.1f}{r.get('cpu_ms_per_sample', float('nan')):>15.2f}"
              f"{r.get('peak_pss_mb', float('nan')):>13.1f}{r.get('time_to_first_batch_s', float('nan')):>15.3f}",
              file=sys.stderr)
    if best:
        print(f"brigade vs best PyTorch ({best['loader']}): rate {b['ratio_rate_vs_best_pytorch']:.2f}x, "
              f"CPU/sample {b['ratio_cpu_vs_best_pytorch']:.2f}x, peak PSS {b['ratio_pss_vs_best_pytorch']:.2f}x",
              file=sys.stderr)
    if native:
        print(f"brigade run vs its own 2-thread decode loop: rate {b['ratio_rate_vs_native_decode_loop']:.2f}x, "
              f"CPU/sample {b['ratio_cpu_vs_native_decode_loop']:.2f}x",
              file=sys.stderr)


if __name__ == "__main__":
    main()
