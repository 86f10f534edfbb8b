"""Two ranks training with torch DDP (gloo on 127.0.0.1, a real all-reduce per step)
over brigade.Loader on a dataset whose shares are uneven for the batch size: every rank
yields the same number of batches (no hang), also when every sample of a batch fails on
one rank only; an evaluation pass with tail="none" sees every sample exactly once."""

import json
import os
import socket
import subprocess
import sys

import pytest

import brigade

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 37  # 2 ranks, batch 3: shares 19 and 18 (7 and 6 batches without evening)
BATCH = 3
# No hang may pass unnoticed: a rank still running after this is a failure (a process
# test's bound on a user-visible promise, not a timing assertion).
RANK_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uneven")
    brigade.write_synthetic_images(str(folder), SAMPLES, width=40, height=32, seed=4)
    return str(folder)


@pytest.fixture(scope="module")
def failing_on_rank0(tmp_path_factory):
    """Without shuffling rank 0's second batch is ids 6, 8, 10: all three corrupt (not
    sample 0, which rank 1's padding repeats)."""
    folder = tmp_path_factory.mktemp("failing")
    paths = brigade.write_synthetic_images(str(folder), SAMPLES, width=40, height=32, seed=5)
    for i in (6, 8, 10):
        with open(paths[i], "wb") as f:
            f.write(b"not a JPEG at all " * 8)
    return str(folder)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, keys, world=2):
    port = free_port()
    procs, outs = [], []
    for rank in range(world):
        out = tmp_path / f"rank{rank}.json"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "TORCHELASTIC_"))}
        env.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "ddp_worker.py"), json.dumps(keys), str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        outs.append(out)
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=RANK_TIMEOUT_S)[0].decode(errors="replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        logs = [p.communicate()[0].decode(errors="replace") for p in procs]
        pytest.fail(f"the DDP ranks hung (keys {keys}):\n" + "\n".join(logs))
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log
    return [json.loads(o.read_text()) for o in outs]


def check_even(results, per_rank_batches):
    for epoch in range(2):
        counts = [r["epochs"][epoch]["batches"] for r in results]
        assert counts == [per_rank_batches] * len(results), counts
        assert [r["epochs"][epoch]["len"] for r in results] == counts  # len(loader) too


def check_evaluation(results):
    for r in results:  # every rank gathered the same: every sample exactly once
        seen = [i for ids in r["eval"] for i in ids]
        assert sorted(seen) == list(range(SAMPLES))
    assert sorted(r["eval_len"] for r in results) == [6, 7]  # uneven: not stepped together


@pytest.mark.parametrize("mode,batches", [
    ({}, 7),                                 # tail pad (default): 19 samples each
    ({"drop_last": True}, 6),                # pad, then the partial batch dropped
    ({"tail": "drop"}, 6),                   # 18 samples each
    ({"tail": "drop", "drop_last": True}, 6),
])
def test_uneven_shares_give_every_rank_the_same_batches(uneven, tmp_path, mode, batches):
    results = run_ranks(tmp_path, dict(data=uneven, batch_size=BATCH, seed=3, **mode))
    check_even(results, batches)
    for epoch in range(2):
        ids = [i for r in results for i in r["epochs"][epoch]["ids"]]
        if mode.get("tail") == "drop" or mode.get("drop_last"):
            assert len(ids) == len(set(ids)) == 2 * batches * BATCH
        else:  # padded: every sample at least once, one repeated from the epoch's start
            assert set(ids) == set(range(SAMPLES)) and len(ids) == SAMPLES + 1
    assert results[0]["epochs"][0]["ids"] != results[0]["epochs"][1]["ids"]  # next epoch
    check_evaluation(results)


def test_a_batch_whose_samples_all_fail_on_one_rank_is_delivered_empty(failing_on_rank0,
                                                                      tmp_path):
    results = run_ranks(tmp_path, dict(data=failing_on_rank0, batch_size=BATCH, shuffle=False))
    check_even(results, 7)
    assert [r["epochs"][0]["empty"] for r in results] == [1, 0]
    assert [r["epochs"][1]["empty"] for r in results] == [1, 0]
