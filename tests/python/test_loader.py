"""brigade.Loader: settings, iteration, epochs, errors, statistics."""

import os

import numpy as np
import pytest
import torch

import brigade
from conftest import IMAGES, NO_LAUNCHER, epoch_ids, make_loader


def test_iterates_an_epoch_of_uint8_batches_with_int64_ids(images):
    loader = make_loader(images, batch_size=8, seed=3)
    assert len(loader) == IMAGES // 8
    batches = list(loader)
    assert len(batches) == IMAGES // 8
    for b in batches:
        assert set(b) == {"data", "ids"}
        assert b["data"].dtype == torch.uint8 and tuple(b["data"].shape) == (8, 224, 224, 3)
        assert b["ids"].dtype == torch.int64 and tuple(b["ids"].shape) == (8,)
    ids = torch.cat([b["ids"] for b in batches]).tolist()
    assert sorted(ids) == list(range(IMAGES))
    assert ids != sorted(ids)  # shuffled
    assert loader.stats()["counts"] == {"samples": IMAGES, "batches": 6, "failed": 0,
                                        "filtered": 0}


def test_same_seed_same_order_and_each_epoch_reshuffles(images):
    a, b = make_loader(images, batch_size=8, seed=3, epochs=2), make_loader(
        images, batch_size=8, seed=3, epochs=2)
    first_a, first_b = epoch_ids(a), epoch_ids(b)
    assert first_a == first_b
    second = epoch_ids(a)
    assert sorted(second) == list(range(IMAGES)) and second != first_a
    assert epoch_ids(a) == []  # the job's two epochs are done
    a.set_epoch(5)
    assert sorted(epoch_ids(a)) == list(range(IMAGES))


def test_set_epoch_chooses_the_shuffle_like_distributed_sampler(images):
    a, b = make_loader(images, batch_size=8, seed=3), make_loader(images, batch_size=8, seed=3,
                                                                 epochs=2)
    a.set_epoch(1)
    epoch_ids(b)
    assert epoch_ids(a) == epoch_ids(b)


def test_numpy_output_and_nchw_layout_without_shuffle(images):
    loader = make_loader(images, batch_size=5, shuffle=False, layout="nchw", output="numpy")
    batches = list(loader)
    assert isinstance(batches[0]["data"], np.ndarray)
    assert batches[0]["data"].shape == (5, 3, 224, 224)
    assert np.concatenate([b["ids"] for b in batches]).tolist() == list(range(IMAGES))
    assert batches[-1]["data"].shape[0] == IMAGES % 5  # the last batch is short
    assert len(loader) == -(-IMAGES // 5)


def test_a_config_file_and_keywords_that_override_it(images, tmp_path):
    config = tmp_path / "job.toml"
    config.write_text(f'data = "{images}"\nbatch_size = 4\nseed = 9\n[stages.decode]\n'
                      'concurrency = 1\n')
    loader = brigade.Loader(str(config), batch_size=6, environment=NO_LAUNCHER)
    assert loader.batch_size == 6
    assert len(list(loader)) == IMAGES // 6
    stats = loader.stats()
    stages = {s["name"]: s for s in stats["stages"]}
    assert stages["decode"]["concurrency"] == 1 and stages["decode"]["tasks"] == IMAGES // 6
    # The figures of actors/stats.h's one description, as `brigade run --json` has them.
    assert list(stages["decode"]) == [
        "name", "kind", "concurrency", "capacity", "tasks", "failures", "filtered", "retries",
        "outputs", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "starved_s", "backpressured_s",
        "occupancy", "items_per_s", "elapsed_s"]
    assert list(stats["sink"]) == ["buffer_size", "delivered", "requests", "ready",
                                   "data_readiness", "consumer_wait_s"]
    assert stats["source_items"] == IMAGES and stats["failures"] == 0


def test_rank_and_world_size_from_torchrun_environment(images):
    env = {"RANK": "1", "WORLD_SIZE": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3"}
    loader = brigade.Loader(data=images, batch_size=4, shuffle=False, environment=env)
    assert (loader.rank, loader.world_size) == (1, 3)
    assert epoch_ids(loader) == list(range(1, IMAGES, 3))
    given = brigade.Loader(data=images, batch_size=4, rank=0, world_size=2, environment=env)
    assert (given.rank, given.world_size) == (0, 2)


def test_config_errors_name_the_key(images, tmp_path):
    cases = [
        (dict(batch_size=-3), "batch_size", "expected a positive integer"),
        (dict(batchsize=3), "batchsize", "unknown key 'batchsize'"),
        (dict(stages={"decode": {"concurency": 2}}), "stages.decode.concurency", "unknown key"),
        (dict(kind="audio"), "kind", "expected one of image, video"),
        (dict(max_failures="120%"), "max_failures", "expected a count"),
        (dict(rank=2, world_size=2), "rank", "rank"),
        (dict(device="cuda:9"), "device", "cuda:9"),  # no such GPU, or no CUDA build
        (dict(seed=object()), "seed", "expected a string, number"),
        (dict(resize=100, size=224), "resize", "at least size 224"),
        (dict(list="files.txt"), "list", "give one of them"),
        (dict(python_stage_threads=0), "python_stage_threads", "expected 1 to 1024"),
        (dict(python_stage=3), "python_stage", "expected a callable"),
    ]
    for keys, key, text in cases:
        with pytest.raises(brigade.ConfigError) as e:
            brigade.Loader(data=images, environment=NO_LAUNCHER, **keys)
        assert e.value.key == key, (keys, str(e.value))
        assert text in str(e.value), (keys, str(e.value))
        assert isinstance(e.value, ValueError)
    with pytest.raises(brigade.ConfigError) as e:
        brigade.Loader(data=str(tmp_path / "missing"), environment=NO_LAUNCHER)
    assert e.value.key == "data" and "missing" in str(e.value)
    bad = tmp_path / "bad.toml"
    bad.write_text("batch_size = 4\nthreads = 'two'\n")
    with pytest.raises(brigade.ConfigError) as e:
        brigade.Loader(str(bad), data=images, environment=NO_LAUNCHER)
    assert e.value.key == "threads" and "bad.toml:2" in str(e.value)
    with pytest.raises(brigade.ConfigError) as e:
        brigade.Loader(data=images, output="jax", environment=NO_LAUNCHER)
    assert e.value.key == "output"


def test_run_only_keys_are_ignored_with_a_warning(images):
    with pytest.warns(UserWarning, match="ids_out is a `brigade run` setting"):
        make_loader(images, ids_out="ids.txt")


def test_failed_samples_are_listed_within_the_budget(images_with_corrupt):
    folder, corrupt = images_with_corrupt
    loader = make_loader(folder, batch_size=4, shuffle=False, max_failures=1)
    batches = list(loader)
    failed = [int(i) for b in batches if "failed" in b for i in b["failed"]]
    delivered = [int(i) for b in batches for i in b["ids"]]
    assert failed == [5]
    assert sorted(delivered) == [i for i in range(12) if i != 5]
    holder = next(b for b in batches if "failed" in b)
    assert holder["data"].shape[0] == 3 and holder["failed"].dtype == torch.int64
    stats = loader.stats()
    assert stats["counts"]["failed"] == 1
    assert stats["recent_failures"][0]["path"] == corrupt
    assert stats["recent_failures"][0]["id"] == 5
    assert stats["recent_failures"][0]["code"] == "bad_data"
    assert stats["recent_failures"][0]["stage"] == "decode"
    assert stats["recent_failures"][0]["message"].startswith(f"sample 5 ({corrupt}): ")


def test_budget_exceeded_raises_decode_error_naming_the_sample(images_with_corrupt):
    folder, corrupt = images_with_corrupt
    loader = make_loader(folder, batch_size=4, shuffle=False, max_failures=0)
    with pytest.raises(brigade.DecodeError) as e:
        list(loader)
    assert e.value.id == 5 and e.value.path == corrupt
    assert e.value.cause and corrupt not in e.value.cause
    # The engine's record as fields: the code's name and the stage, no text parsed.
    assert e.value.code == "bad_data" and e.value.stage == "decode"
    assert e.value.causes[0]["code"] == "bad_data"
    assert e.value.causes[0]["message"] == f"sample 5 ({corrupt}): {e.value.cause}"
    assert isinstance(e.value, brigade.PipelineError)
    assert [c["id"] for c in e.value.causes] == [5]
    assert e.value.causes[0]["stage"] in ("read", "decode")
    # As `brigade run` writes its checkpoint after a failure, the state is still there.
    assert loader.state_dict()["checkpoint"]


def test_a_missing_file_fails_in_the_read_stage_once_with_its_code(tmp_path):
    # A file listed, then gone: the read fails with not_found, read once (not a
    # transient error: the read stage's retry leaves it alone).
    paths = brigade.write_synthetic_images(str(tmp_path), 6, width=32, height=24, seed=4)
    loader = make_loader(str(tmp_path), batch_size=3, shuffle=False, max_failures=0)
    os.remove(paths[2])
    with pytest.raises(brigade.DecodeError) as e:
        list(loader)
    assert (e.value.id, e.value.path) == (2, paths[2])
    assert e.value.code == "not_found" and e.value.stage == "read"
    read = next(s for s in loader.stats()["stages"] if s["name"] == "read")
    assert read["retries"] == 0


def test_a_transient_read_error_is_retried_and_a_corrupt_file_is_not(tmp_path,
                                                                       images_with_corrupt):
    # The Loader runs the job's read stage with its retry: hung_fs (the FUSE helper of
    # tests/launch) serves flaky.jpg, whose first two reads fail with EAGAIN; the sample
    # is delivered after two retries, and the corrupt file fails without one.
    import pathlib
    import subprocess
    import time
    hung_fs = pathlib.Path(brigade.__file__).resolve().parents[2] / "tests/launch/hung_fs"
    if not hung_fs.exists():
        pytest.skip("no hung_fs helper (built without libfuse3)")
    folder, corrupt = images_with_corrupt
    good = sorted(str(p) for p in pathlib.Path(folder).glob("*.jpg") if str(p) != corrupt)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with open(tmp_path / "fs.log", "wb") as log:
        server = subprocess.Popen([str(hung_fs), str(mnt), str(tmp_path / "read"), good[0], "2"],
                                  stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 5
        while not (mnt / "flaky.jpg").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not (mnt / "flaky.jpg").exists():
            pytest.skip("cannot mount a FUSE file system here")
        listed = [str(mnt / "flaky.jpg"), corrupt] + good[1:6]
        (tmp_path / "list.txt").write_text("\n".join(listed) + "\n")
        loader = brigade.Loader(list=str(tmp_path / "list.txt"), environment=NO_LAUNCHER,
                                threads=2, batch_size=4, shuffle=False, max_failures=1)
        batches = list(loader)
        delivered = sorted(int(i) for b in batches for i in b["ids"])
        failed = [int(i) for b in batches if "failed" in b for i in b["failed"]]
        assert delivered == [0, 2, 3, 4, 5, 6]  # the flaky sample among them
        assert failed == [1]
        assert (tmp_path / "read.flaky-2").exists()
        read = next(s for s in loader.stats()["stages"] if s["name"] == "read")
        assert read["retries"] == 2 and read["failures"] == 0
        assert loader.stats()["recent_failures"][0]["code"] == "bad_data"
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["umount", "-l", str(mnt)], stderr=subprocess.DEVNULL, check=False)


def test_stop_from_another_thread_ends_the_iteration_and_a_resume_continues(images):
    import threading
    full = epoch_ids(make_loader(images, batch_size=4, seed=8))
    loader = make_loader(images, batch_size=4, seed=8)
    seen = []
    for batch in loader:
        seen.extend(int(i) for i in batch["ids"])
        if len(seen) == 8:
            stopper = threading.Thread(target=loader.stop)
            stopper.start()
            stopper.join()
    assert seen[:8] == full[:8] and len(seen) < IMAGES
    state = loader.state_dict()
    after = make_loader(images, batch_size=4, seed=8)
    after.set_epoch(1)
    assert epoch_ids(loader) == epoch_ids(after)  # the next iteration runs the next epoch
    resumed = make_loader(images, batch_size=4, seed=8)
    resumed.load_state_dict(state)
    assert seen + epoch_ids(resumed) == full


def test_the_gil_is_free_while_the_loader_waits(tmp_path):
    import threading
    import time
    # Large JPEGs, one decode thread: the first batch takes a while to come.
    brigade.write_synthetic_images(str(tmp_path), 16, width=800, height=600, seed=3)
    loader = brigade.Loader(data=str(tmp_path), batch_size=16, threads=1,
                            stages={"read": {"concurrency": 1}}, environment=NO_LAUNCHER)
    ticks, done = [], threading.Event()

    def tick():  # needs the GIL after every sleep
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.01)
    start = time.monotonic()
    batch = next(iter(loader))
    end = time.monotonic()
    done.set()
    ticker.join()
    assert batch["data"].shape[0] == 16
    during = [t for t in ticks if start <= t <= end]
    if end - start < 0.05:
        pytest.skip(f"the batch came in {end - start:.3f} s: too fast to tell")
    # Held across the wait, the GIL would let the ticker run a few times at most.
    assert len(during) >= (end - start) / 0.01, (len(during), end - start)


def test_image_transform_and_normalize_keys(images):
    train = make_loader(images, batch_size=8, transform="train", size=96, scale=[0.5, 1.0])
    batch = next(iter(train))
    assert tuple(batch["data"].shape) == (8, 96, 96, 3) and batch["data"].dtype == torch.uint8
    norm = make_loader(images, batch_size=8, normalize="imagenet", layout="nchw", size=64)
    batch = next(iter(norm))
    assert batch["data"].dtype == torch.float32 and tuple(batch["data"].shape) == (8, 3, 64, 64)
    assert -3 < float(batch["data"].min()) < float(batch["data"].max()) < 3
    with pytest.raises(brigade.ConfigError) as e:
        make_loader(images, transform="sharpen")
    assert e.value.key == "transform"
    # interpolation: a key of the decode spec like the others, and it changes pixels.
    bilinear = next(iter(make_loader(images, batch_size=8, shuffle=False, size=96)))["data"]
    bicubic = next(iter(make_loader(images, batch_size=8, shuffle=False, size=96,
                                    interpolation="bicubic")))["data"]
    assert bicubic.shape == bilinear.shape and not torch.equal(bicubic, bilinear)
    with pytest.raises(brigade.ConfigError) as e:
        make_loader(images, interpolation="lanczos")
    assert e.value.key == "interpolation"
