"""A Python callable as a stage of the engine (the slow path): several threads, batch
order kept, counted in the statistics.

The loop's thread waits inside the C++ iterator while the transform threads need the
GIL to run: these tests would deadlock (and time out) if the iterator held the GIL
while it waits."""

import threading
import time

import pytest
import torch

from conftest import IMAGES, epoch_ids, make_loader


def test_several_threads_call_the_transform_and_order_is_kept(images):
    lock = threading.Lock()
    threads, running, peak = set(), [0], [0]

    def transform(batch):
        with lock:
            threads.add(threading.get_ident())
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.03)  # releases the GIL, as torch or NumPy work does
        out = {"ids": batch["ids"], "mean": batch["data"].float().mean()}
        with lock:
            running[0] -= 1
        return out

    plain = epoch_ids(make_loader(images, batch_size=4, seed=2))
    loader = make_loader(images, batch_size=4, seed=2, python_stage=transform,
                         python_stage_threads=4)
    got = list(loader)
    assert [int(i) for b in got for i in b["ids"]] == plain
    assert all(set(b) == {"ids", "mean"} and b["mean"] > 0 for b in got)
    assert threading.get_ident() not in threads
    assert len(threads) >= 2 and peak[0] >= 2, (threads, peak)


def test_state_dict_covers_only_handed_out_batches_of_a_transform(images):
    full = epoch_ids(make_loader(images, batch_size=4, seed=2))
    loader = make_loader(images, batch_size=4, seed=2, python_stage=lambda b: b,
                         python_stage_threads=3)
    it = iter(loader)
    seen = [int(i) for _ in range(2) for i in next(it)["ids"]]
    state = loader.state_dict()  # three more batches are in the transform
    resumed = make_loader(images, batch_size=4, seed=2)
    resumed.load_state_dict(state)
    assert seen + epoch_ids(resumed) == full


def test_an_exception_in_the_transform_reaches_the_loop(images):
    def transform(batch):
        if 0 in batch["ids"].tolist():
            raise ValueError("no sample 0, please")
        return batch

    loader = make_loader(images, batch_size=4, seed=2, python_stage=transform, python_stage_threads=2)
    with pytest.raises(ValueError, match="no sample 0"):
        list(loader)
    with pytest.raises(Exception, match="python_stage: expected a callable"):
        make_loader(images, python_stage=3)


def test_stop_drops_the_batches_in_the_transform_and_a_resume_continues(images):
    full = epoch_ids(make_loader(images, batch_size=4, seed=2))
    loader = make_loader(images, batch_size=4, seed=2, python_stage=lambda b: b,
                         python_stage_threads=3)
    seen = []
    for batch in loader:
        seen.extend(int(i) for i in batch["ids"])
        if len(seen) == 8:
            loader.stop()
    assert seen == full[:8]
    resumed = make_loader(images, batch_size=4, seed=2, python_stage=lambda b: b)
    resumed.load_state_dict(loader.state_dict())
    assert seen + epoch_ids(resumed) == full


def test_the_python_stage_is_a_stage_of_the_engine_and_a_state_dict_taken_inside_resumes(images):
    full = epoch_ids(make_loader(images, batch_size=4, seed=2))
    first_two = set(full[:8])
    entered, release = threading.Condition(), threading.Event()
    waiting = [0]

    def transform(batch):
        if int(batch["ids"][0]) not in first_two:  # later batches wait inside the stage
            with entered:
                waiting[0] += 1
                entered.notify_all()
            release.wait()
        return batch

    loader = make_loader(images, batch_size=4, seed=2, python_stage=transform,
                         python_stage_threads=3)
    it = iter(loader)
    seen = [int(i) for _ in range(2) for i in next(it)["ids"]]
    with entered:
        entered.wait_for(lambda: waiting[0] >= 2)  # two more batches are in the stage
    state = loader.state_dict()
    stage = next(s for s in loader.stats()["stages"] if s["name"] == "python_stage")
    assert stage["concurrency"] == 3
    assert loader.stats()["counts"]["batches"] == 2
    release.set()
    rest_here = [int(i) for b in it for i in b["ids"]]
    assert seen + rest_here == full
    stage = next(s for s in loader.stats()["stages"] if s["name"] == "python_stage")
    assert stage["tasks"] == len(full) // 4 and stage["outputs"] == len(full) // 4
    resumed = make_loader(images, batch_size=4, seed=2, python_stage=lambda b: b)
    resumed.load_state_dict(state)
    assert seen + epoch_ids(resumed) == full
