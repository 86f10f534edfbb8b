"""Train an image classifier with brigade.Loader and torch DDP, checkpoint mid-epoch, resume.

The data is a folder of class folders (DIR/CLASS/.../IMAGE, torchvision ImageFolder's
layout: ``labels="folder"`` gives ImageFolder's classes, order and labels), by default
Brigade's demo set (10 classes, generated once under ~/.cache/brigade/demo).

    # two processes on the CPU (gloo); use --nproc_per_node GPUS and --device cuda on GPUs
    torchrun --nproc_per_node 2 examples/train_classifier.py --steps 200 --save-at 100 \
        --checkpoint ckpt
    # after a crash past step 100: continue exactly where the checkpoint was written
    torchrun --nproc_per_node 2 examples/train_classifier.py --steps 200 --resume ckpt

    # the property this example is about: N steps straight, and K steps + checkpoint +
    # a fresh process state resumed for N - K steps, see exactly the same samples
    torchrun --nproc_per_node 2 examples/train_classifier.py --check-resume --steps 6 --save-at 3

(Debian 12's torchrun, torch 1.13 on Python 3.11, fails at start with "'NoneType' object
has no attribute 'get'" unless given ``--redirects 1 --tee 1``: a Python 3.11 change to
IntFlag that later torch versions handle.)

A checkpoint is one file per rank holding the model, the optimizer and that rank's
loader state (``loader.state_dict()``: the batches handed out so far, mid-epoch
included); resuming loads all three, and the loader continues with the batch after
the last one the checkpoint covers.
"""

import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import brigade


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="folder of class folders (default: Brigade's demo set)")
    ap.add_argument("--steps", type=int, default=100,
                    help="training steps in all (batches per rank; a resumed run does the rest)")
    ap.add_argument("--batch-size", type=int, default=32, help="samples per batch per rank")
    ap.add_argument("--size", type=int, default=64, help="side of the training crops")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0, help="shuffle, augmentation and model seed")
    ap.add_argument("--threads", type=int, default=None, help="Brigade threads per rank")
    ap.add_argument("--checkpoint", help="folder to write the checkpoint into at the end")
    ap.add_argument("--save-at", type=int, default=None,
                    help="also write the checkpoint after this many steps")
    ap.add_argument("--resume", help="folder of a checkpoint to continue from")
    ap.add_argument("--eval-batches", type=int, default=None,
                    help="batches per rank of the evaluation pass (default: the whole set)")
    ap.add_argument("--check-resume", action="store_true",
                    help="check that a run resumed at --save-at sees the samples of a run "
                         "that was not interrupted (exit status 1 if not)")
    return ap.parse_args()


class SmallCNN(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.features(x))


def make_loader(args, train):
    """The training loader (shuffled, RandomResizedCrop + flip) or the evaluation one
    (every sample once, in order: resize + center crop). Settings are brigade run's keys."""
    return brigade.Loader(
        data=args.data, demo=args.data is None, labels="folder",
        transform="train" if train else "eval", size=args.size, resize=args.size * 8 // 7,
        layout="nchw", normalize="imagenet",  # float32 NCHW batches, as torchvision's
        batch_size=args.batch_size, seed=args.seed, shuffle=train,
        tail="pad" if train else "none", threads=args.threads)


def make_model(classes, args):
    torch.manual_seed(args.seed)  # the same initial weights on every rank and every run
    model = SmallCNN(classes)
    ddp = DDP(model) if dist.is_initialized() else model
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    return ddp, optimizer


def batches(loader):
    """The loader's batches, epoch after epoch (each iteration runs the next epoch)."""
    while True:
        yield from loader


def train(model, optimizer, loader, steps, args, seen=None, first=0):
    """`steps` training steps, numbered from `first`; appends (ids, labels) of each
    batch to `seen`."""
    model.train()
    it = batches(loader)
    for step in range(first, first + steps):
        batch = next(it)
        x, y = batch["data"], batch["label"]
        if seen is not None:
            seen.append((batch["ids"].tolist(), y.tolist()))
        # Summed over the batch and divided by the batch size asked for: a batch whose
        # every sample failed (0 rows) adds nothing, and every rank still steps.
        loss = F.cross_entropy(model(x), y, reduction="sum") / args.batch_size
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0 and rank() == 0 and seen is None:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)


def save(folder, model, optimizer, loader, step):
    os.makedirs(folder, exist_ok=True)
    state = {"model": unwrap(model).state_dict(), "optimizer": optimizer.state_dict(),
             "loader": loader.state_dict(), "step": step}
    path = os.path.join(folder, f"rank-{rank()}.pt")
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)  # a crash mid-write leaves the previous one
    if dist.is_initialized():
        dist.barrier()  # every rank's file is written before anyone goes on


def load(folder, model, optimizer, loader):
    """Restores the three; returns the steps done before the checkpoint."""
    state = torch.load(os.path.join(folder, f"rank-{rank()}.pt"))
    unwrap(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    loader.load_state_dict(state["loader"])
    return state["step"]


def evaluate(model, args):
    loader = make_loader(args, train=False)
    model.eval()
    correct = torch.zeros(2, dtype=torch.int64)  # (correct, seen)
    with torch.no_grad():
        for i, batch in enumerate(loader):
            if args.eval_batches is not None and i >= args.eval_batches:
                loader.stop()
                break
            pred = unwrap(model)(batch["data"]).argmax(1)
            correct += torch.tensor([(pred == batch["label"]).sum().item(), len(pred)])
    if dist.is_initialized():
        dist.all_reduce(correct)
    return correct[0].item() / max(1, correct[1].item()), correct[1].item()


def unwrap(model):
    return model.module if isinstance(model, DDP) else model


def rank():
    return dist.get_rank() if dist.is_initialized() else 0


def check_resume(args, classes):
    """N steps straight vs K steps, checkpoint, fresh objects, N - K steps: the same
    (ids, labels) at every step, and the same weights at the end."""
    k = args.save_at if args.save_at is not None else args.steps // 2
    straight, resumed = [], []
    model, optimizer = make_model(len(classes), args)
    train(model, optimizer, make_loader(args, train=True), args.steps, args, straight)
    weights = [p.detach().clone() for p in unwrap(model).parameters()]

    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "ckpt")
        if dist.is_initialized():  # one folder for every rank: rank 0's
            names = [folder]
            dist.broadcast_object_list(names, src=0)
            folder = names[0]
        model, optimizer = make_model(len(classes), args)
        loader = make_loader(args, train=True)
        train(model, optimizer, loader, k, args, resumed)
        save(folder, model, optimizer, loader, k)
        del model, optimizer, loader  # what a crash loses
        model, optimizer = make_model(len(classes), args)
        torch.manual_seed(12345)  # the resumed run's own state cannot matter
        loader = make_loader(args, train=True)
        assert load(folder, model, optimizer, loader) == k
        train(model, optimizer, loader, args.steps - k, args, resumed, first=k)
        if dist.is_initialized():
            dist.barrier()  # rank 0's folder outlives every rank's load

    same_samples = straight == resumed
    weight_diff = max((a - b).abs().max().item()
                      for a, b in zip(weights, unwrap(model).parameters()))
    ok = torch.tensor([int(same_samples)])
    if dist.is_initialized():
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    epoch_steps = len(make_loader(args, train=True))
    print(f"rank {rank()}: {args.steps} steps straight vs {k} + checkpoint + {args.steps - k} "
          f"resumed (epoch of {epoch_steps} steps): samples "
          f"{'identical' if same_samples else 'DIFFER'} ({sum(len(i) for i, _ in straight)} "
          f"ids, labels included), largest weight difference {weight_diff:.3g}", flush=True)
    if not same_samples:
        for step, (a, b) in enumerate(zip(straight, resumed)):
            if a != b:
                print(f"rank {rank()}: first difference at step {step}: {a} vs {b}",
                      file=sys.stderr)
                break
    return bool(ok.item())


def main():
    args = parse_args()
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")  # CPU; "nccl" with --device cuda on GPUs
    # Rank 0 makes the demo set (once) before the others read it.
    if rank() == 0:
        classes = make_loader(args, train=True).classes
    if dist.is_initialized():
        dist.barrier()
    if rank() != 0:
        classes = make_loader(args, train=True).classes
    if rank() == 0:
        print(f"{len(classes)} classes: {', '.join(classes[:10])}"
              f"{', …' if len(classes) > 10 else ''}", flush=True)

    if args.check_resume:
        ok = check_resume(args, classes)
        if rank() == 0:
            print("resume check:", "OK" if ok else "FAILED", flush=True)
        if args.eval_batches is not None:  # the evaluation transform's path too
            model, _ = make_model(len(classes), args)
            accuracy, seen = evaluate(model, args)
            if rank() == 0:
                print(f"eval of an untrained model: accuracy {accuracy:.3f} on {seen} images")
        if dist.is_initialized():
            dist.destroy_process_group()
        sys.exit(0 if ok else 1)

    model, optimizer = make_model(len(classes), args)
    loader = make_loader(args, train=True)
    done = load(args.resume, model, optimizer, loader) if args.resume else 0
    t0 = time.monotonic()
    # Steps up to --save-at, a checkpoint there, then the rest (--steps in all).
    pause = args.save_at if args.save_at is not None and args.checkpoint else args.steps
    if done < pause:
        train(model, optimizer, loader, pause - done, args, first=done)
        done = pause
        if done < args.steps:
            save(args.checkpoint, model, optimizer, loader, done)
    train(model, optimizer, loader, max(0, args.steps - done), args, first=done)
    if args.checkpoint:
        save(args.checkpoint, model, optimizer, loader, max(done, args.steps))
    seconds = time.monotonic() - t0
    accuracy, seen = evaluate(model, args)
    if rank() == 0:
        print(f"step {args.steps} reached in {seconds:.1f} s; eval accuracy {accuracy:.3f} on {seen} "
              f"images", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
