"""state_dict / load_state_dict: exact resume mid-epoch, elastic resume, bad states."""

import io

import pytest
import torch

import brigade
from conftest import IMAGES, epoch_ids, make_loader


def take(loader, n):
    it = iter(loader)
    return [int(i) for _ in range(n) for i in next(it)["ids"]]


@pytest.mark.parametrize("order", ["input", "completion"])
def test_exact_resume_mid_epoch_through_torch_save(images, order):
    full = epoch_ids(make_loader(images, batch_size=4, seed=7, order=order))
    first = make_loader(images, batch_size=4, seed=7, order=order)
    seen = take(first, 3)
    buffer = io.BytesIO()
    torch.save({"loader": first.state_dict(), "step": 3}, buffer)
    del first
    buffer.seek(0)
    saved = torch.load(buffer)
    second = make_loader(images, batch_size=4, seed=7, order=order)
    second.load_state_dict(saved["loader"])
    rest = epoch_ids(second)
    if order == "input":
        assert seen + rest == full
    assert sorted(seen + rest) == list(range(IMAGES))  # none lost, none repeated


def test_resume_with_set_epoch_continues_and_then_starts_the_next_epoch(images):
    a = make_loader(images, batch_size=4, seed=7, epochs=2)
    e0 = epoch_ids(a)
    e1 = epoch_ids(a)
    b = make_loader(images, batch_size=4, seed=7, epochs=2)
    b.set_epoch(1)
    head = take(b, 2)
    c = make_loader(images, batch_size=4, seed=7, epochs=2)
    c.load_state_dict(b.state_dict())
    assert c.epoch == 1
    c.set_epoch(1)
    assert head + epoch_ids(c) == e1
    assert e0 != e1


def test_elastic_resume_at_another_world_size(images):
    world = [make_loader(images, batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
    seen = take(world[0], 2) + take(world[1], 3)
    states = [w.state_dict() for w in world]
    assert [s["rank"] for s in states] == [0, 1] and states[0]["world_size"] == 2
    rest = []
    for r in range(3):
        loader = make_loader(images, batch_size=4, seed=5, rank=r, world_size=3)
        loader.load_state_dict({"ranks": states} if r else states)
        rest += epoch_ids(loader)
    assert sorted(seen + rest) == list(range(IMAGES))


def test_exact_resume_at_the_same_world_size_from_every_rank_state(images):
    full = epoch_ids(make_loader(images, batch_size=4, seed=5, rank=1, world_size=2))
    world = [make_loader(images, batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
    seen = take(world[1], 2)
    take(world[0], 1)
    resumed = make_loader(images, batch_size=4, seed=5, rank=1, world_size=2)
    resumed.load_state_dict([w.state_dict() for w in world])
    assert seen + epoch_ids(resumed) == full


def test_bad_states_are_refused(images):
    one = make_loader(images, batch_size=4, seed=5, rank=0, world_size=2)
    take(one, 1)
    state = one.state_dict()
    three = make_loader(images, batch_size=4, seed=5, rank=0, world_size=3)
    with pytest.raises(brigade.CheckpointError) as e:
        three.load_state_dict(state)
    assert e.value.kind == "incomplete" and "every rank" in str(e.value)
    other_rank = make_loader(images, batch_size=4, seed=5, rank=1, world_size=2)
    with pytest.raises(brigade.CheckpointError, match="no state of rank 1"):
        other_rank.load_state_dict(state)
    data = bytearray(state["checkpoint"])
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF
    broken = dict(state, checkpoint=bytes(data))
    with pytest.raises(brigade.CheckpointError) as e:
        make_loader(images, batch_size=4, seed=5, rank=0, world_size=2).load_state_dict(broken)
    assert e.value.kind == "corrupt"
    with pytest.raises(brigade.ConfigError, match="conflicts"):
        make_loader(images, batch_size=4, seed=6, rank=0, world_size=2).load_state_dict(state)
    with pytest.raises(brigade.CheckpointError, match="not a brigade.Loader state dict"):
        make_loader(images, batch_size=4).load_state_dict({"epoch": 0})
