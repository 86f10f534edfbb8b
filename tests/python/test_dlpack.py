"""Batches through DLPack: no copy, buffers kept alive while used, then pooled."""

import gc

import numpy as np
import torch

import brigade
from conftest import IMAGES, make_loader


def test_tensors_share_the_cpp_buffer(images):
    loader = make_loader(images, batch_size=8, output="dlpack")
    batch = next(iter(loader))
    data = batch["data"]
    assert isinstance(data, brigade.Tensor)
    assert data.dtype == "uint8" and data.shape == [8, 224, 224, 3]
    assert data.__dlpack_device__() == (1, 0)
    as_torch = torch.from_dlpack(data)
    as_numpy = np.from_dlpack(data)
    assert as_torch.data_ptr() == data.data_ptr == data.buffer_ptr
    assert as_numpy.ctypes.data == data.data_ptr
    as_torch[0, 0, 0, 0] = 7
    as_torch[0, 0, 0, 1] = 201
    assert as_numpy[0, 0, 0, :2].tolist() == [7, 201]  # one memory, two views
    ids = batch["ids"]
    assert torch.from_dlpack(ids).data_ptr() == ids.data_ptr
    assert torch.from_dlpack(ids).dtype == torch.int64


def test_default_torch_output_is_the_pooled_buffer(images):
    dl = make_loader(images, batch_size=8, seed=4, output="dlpack")
    pt = make_loader(images, batch_size=8, seed=4)
    for a, b in zip(dl, pt):
        assert torch.equal(torch.from_dlpack(a["data"]), b["data"])
        assert b["data"].is_contiguous()


def test_a_held_batch_is_never_reused_and_released_ones_are(images):
    loader = make_loader(images, batch_size=4, output="dlpack", epochs=6)
    held = next(iter(loader))["data"]
    held_torch = torch.from_dlpack(held)
    del held  # the torch tensor alone keeps the buffer now
    copy = held_torch.clone()
    buffers = []
    while True:
        got = list(loader)
        if not got:
            break
        for batch in got[:]:
            buffers.append(batch["data"].buffer_ptr)
        del got
        gc.collect()
    # The first iteration took one batch; the next iterations ran epochs 1 … 5.
    assert len(buffers) == 5 * IMAGES // 4
    assert held_torch.data_ptr() not in buffers
    assert torch.equal(held_torch, copy)
    # Released buffers go back to the pool: few distinct ones over 71 batches (the
    # pipeline's bound plus one epoch's list held at once), not one per batch.
    assert len(set(buffers)) <= 12 + 16, len(set(buffers))


def test_memory_stays_bounded_over_many_batches(images):
    loader = make_loader(images, batch_size=4, output="dlpack", epochs=8)
    seen = set()
    count = 0
    for epoch in range(8):
        loader.set_epoch(epoch)
        for batch in loader:
            arr = np.from_dlpack(batch["data"])
            seen.add(arr.ctypes.data)
            count += 1
            del arr, batch
    assert count == 8 * IMAGES // 4
    # One batch alive at a time: the pool recycles a handful of buffers.
    assert len(seen) <= 16, len(seen)


def test_an_unconsumed_capsule_frees_its_view(images):
    loader = make_loader(images, batch_size=4, output="dlpack", epochs=4)
    seen = set()
    for epoch in range(4):
        loader.set_epoch(epoch)
        for batch in loader:
            capsule = batch["data"].__dlpack__()
            seen.add(batch["data"].buffer_ptr)
            del capsule, batch
    assert len(seen) <= 16, len(seen)
