"""Epochs as a PyTorch loop expects them: each iteration is the next epoch, no epoch
limit unless given, an epoch left early (break, stop) is fine, len() tells what the
next iteration yields; and the small things a new user meets on day one."""

import logging

import pytest
import torch

import brigade
from conftest import IMAGES, NO_LAUNCHER, epoch_ids, make_loader


def reference(images, epoch, **keys):
    loader = make_loader(images, batch_size=8, seed=3, **keys)
    loader.set_epoch(epoch)
    return epoch_ids(loader)


def test_each_iteration_is_the_next_epoch_without_a_limit(images):
    loader = make_loader(images, batch_size=8, seed=3)
    epochs = []
    for epoch in range(4):
        assert loader.epoch == epoch and len(loader) == IMAGES // 8
        epochs.append(epoch_ids(loader))
    for epoch, ids in enumerate(epochs):
        assert sorted(ids) == list(range(IMAGES))
        assert ids == reference(images, epoch)  # the shuffle of (seed, epoch)
    assert len({tuple(ids) for ids in epochs}) == 4


def test_epochs_limits_the_job_when_given(images):
    loader = make_loader(images, batch_size=8, seed=3, epochs=2)
    assert [len(epoch_ids(loader)) for _ in range(3)] == [IMAGES, IMAGES, 0]
    assert len(loader) == 0


def test_break_then_the_next_iteration_runs_the_next_epoch(images):
    loader = make_loader(images, batch_size=8, seed=3)
    for i, batch in enumerate(loader):
        if i == 1:
            break
    assert epoch_ids(loader) == reference(images, 1)
    it = iter(loader)
    next(it)
    loader.stop()  # as a break, from any thread
    assert list(it) == []
    assert epoch_ids(loader) == reference(images, 3)


def test_iter_twice_without_a_batch_continues_the_same_epoch(images):
    loader = make_loader(images, batch_size=8, seed=3)
    iter(loader)
    assert epoch_ids(loader) == reference(images, 0)


def test_set_epoch_while_an_epoch_is_in_progress_leaves_it(images):
    loader = make_loader(images, batch_size=8, seed=3)
    next(iter(loader))
    loader.set_epoch(5)
    assert loader.epoch == 5
    assert epoch_ids(loader) == reference(images, 5)


@pytest.mark.parametrize("python_stage", [None, lambda b: b])
def test_state_dict_after_a_break_resumes_where_the_loop_left(images, python_stage):
    keys = dict(python_stage=python_stage, python_stage_threads=3) if python_stage else {}
    full = reference(images, 0)
    loader = make_loader(images, batch_size=8, seed=3, **keys)
    seen = []
    for batch in loader:
        seen += batch["ids"].tolist()
        if len(seen) == 16:
            break
    state = loader.state_dict()
    resumed = make_loader(images, batch_size=8, seed=3, **keys)
    resumed.load_state_dict(state)
    assert len(resumed) == (IMAGES - 16) // 8  # what is left of the resumed epoch
    assert seen + epoch_ids(resumed) == full
    assert epoch_ids(resumed) == reference(images, 1)  # then the next epoch
    assert epoch_ids(loader) == reference(images, 1)  # the original went on to epoch 1


def test_state_dict_after_stop_covers_what_was_handed_out(images):
    full = reference(images, 0)
    loader = make_loader(images, batch_size=8, seed=3, python_stage=lambda b: b,
                         python_stage_threads=3)
    seen = []
    for batch in loader:
        seen += batch["ids"].tolist()
        if len(seen) == 8:
            loader.stop()
    assert seen == full[:8]
    resumed = make_loader(images, batch_size=8, seed=3)
    resumed.load_state_dict(loader.state_dict())
    assert seen + epoch_ids(resumed) == full


def test_len_with_drop_last_and_tail(images):
    # 48 samples, 3 ranks: 16 each; batch 5: 4 batches, 3 with drop_last.
    for keys, expected in [({}, 4), ({"drop_last": True}, 3)]:
        lens = [len(make_loader(images, batch_size=5, rank=r, world_size=3, **keys))
                for r in range(3)]
        assert lens == [expected] * 3
    # 48 samples, 5 ranks: pad to 10 each, drop to 9 each, none 10/10/10/9/9.
    assert [len(make_loader(images, batch_size=1, rank=r, world_size=5)) for r in range(5)] == [10] * 5
    assert [len(make_loader(images, batch_size=1, rank=r, world_size=5, tail="drop"))
            for r in range(5)] == [9] * 5
    assert [len(make_loader(images, batch_size=1, rank=r, world_size=5, tail="none"))
            for r in range(5)] == [10, 10, 10, 9, 9]


def test_no_data_is_an_error_unless_the_demo_is_asked_for():
    with pytest.raises(brigade.ConfigError, match="demo=True") as e:
        brigade.Loader(environment=NO_LAUNCHER)
    assert e.value.key == "data"


def test_sample_failures_go_to_the_brigade_logger(images_with_corrupt, caplog):
    folder, corrupt = images_with_corrupt
    loader = make_loader(folder, batch_size=4)
    with caplog.at_level(logging.WARNING, logger="brigade"):
        failed = [i for b in loader for i in b.get("failed", torch.tensor([])).tolist()]
    assert failed == [5]
    messages = [r.getMessage() for r in caplog.records if r.name == "brigade"]
    assert any(corrupt in m and "sample 5" in m for m in messages), messages


def test_papercuts_name_what_the_user_wrote(images):
    with pytest.raises(brigade.ConfigError, match=r"got 32\.0 \(a float\)"):
        make_loader(images, batch_size=32.0)
    with pytest.raises(brigade.ConfigError) as e:
        make_loader(images, rank=3, world_size=2)
    assert "brigade.Loader(rank=" in str(e.value) and "brigade.Loader:" not in str(e.value)
    with pytest.warns(UserWarning, match="progress"):
        make_loader(images, progress=True)


def test_roi_decode_can_be_turned_off(tmp_path):
    # Large images, small crops: the region decode reads them at a reduced DCT scale, so
    # its pixels differ from a full decode's (the trade-off README states); off, they
    # are the full decode's.
    brigade.write_synthetic_images(str(tmp_path), 4, width=1600, height=1200, seed=9)
    keys = dict(batch_size=4, seed=3, transform="train", size=32, scale=[0.5, 1.0])
    on = next(iter(make_loader(str(tmp_path), **keys)))
    off = next(iter(make_loader(str(tmp_path), roi_decode=False, **keys)))
    assert on["ids"].tolist() == off["ids"].tolist()  # the same crops of the same samples
    diff = (on["data"].float() - off["data"].float()).abs()
    assert diff.max() > 0  # the setting reaches the decoder
    assert diff.mean() < 8  # and both are the same picture
