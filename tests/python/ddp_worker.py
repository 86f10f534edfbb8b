"""One rank of the DDP tests (test_ddp.py): trains a tiny model with torch's
DistributedDataParallel (gloo) over brigade.Loader, a real all-reduce per step, then runs
an evaluation pass that gathers ids. Writes what it saw as JSON to argv[2].

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as torchrun sets them).
argv[1]: a JSON object of the Loader's keyword arguments for training."""

import faulthandler
import json
import os
import sys

import torch
import torch.distributed as dist

import brigade


def main() -> None:
    keys = json.loads(sys.argv[1])
    out = sys.argv[2]
    # A hang shows where each thread is before the test's bound ends it.
    faulthandler.dump_traceback_later(float(os.environ.get("DDP_DUMP_AFTER_S", "150")), exit=True)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 8, stride=8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loader = brigade.Loader(layout="nchw", size=32, threads=1, stages={"read": {"concurrency": 2}},
                            **keys)
    batch_size = loader.batch_size
    epochs = []
    for _ in range(2):  # each iteration is the next epoch
        expected = len(loader)
        batches, ids, empty = 0, [], 0
        for batch in loader:
            x = batch["data"].float().div_(255)
            y = batch["ids"] % 2
            # An empty batch (every sample failed) adds zero: the step still runs, so the
            # all-reduce of the other ranks has its partner.
            loss = torch.nn.functional.cross_entropy(ddp(x), y, reduction="sum") / batch_size
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batches += 1
            empty += int(len(y) == 0)
            ids += batch["ids"].tolist()
        epochs.append({"batches": batches, "len": expected, "ids": ids, "empty": empty})
        print(f"rank {rank}: epoch {len(epochs) - 1}: {batches} batches", file=sys.stderr, flush=True)
    # Evaluation: every sample exactly once, uneven counts, results gathered.
    evaluation = brigade.Loader(data=keys["data"], batch_size=keys["batch_size"], shuffle=False,
                                tail="none", size=32, threads=1)
    eval_len = len(evaluation)
    seen = [i for batch in evaluation for i in batch["ids"].tolist()]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, seen)
    with open(out, "w") as f:
        json.dump({"rank": rank, "epochs": epochs, "eval": gathered, "eval_len": eval_len}, f)
    dist.barrier()
    # Torch 1.13's gloo teardown can hang: ProcessGroupGloo's destructor (run when the
    # DDP reducer goes) joins threads still waiting on a peer that has exited (seen here
    # in about 1 of 10 runs, in ~ProcessGroupGloo). What the test checks is written.
    os._exit(0)


if __name__ == "__main__":
    main()
