"""Several datasets mixed by weight: Loader(sources=[...]) yields batch["source"] beside
batch["label"] (both without a copy), names its sources, and resumes exactly from a
state dict."""

import os

import pytest
import torch

import brigade
from conftest import NO_LAUNCHER


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
    """Source "a": class folders a0 (6 images), a1 (6); source "b": b0 (4), b1 (4), b2 (4)."""
    root = tmp_path_factory.mktemp("mix")
    for seed, (folder, n) in enumerate([("a/a0", 6), ("a/a1", 6), ("b/b0", 4), ("b/b1", 4),
                                        ("b/b2", 4)]):
        os.makedirs(root / folder)
        brigade.write_synthetic_images(str(root / folder), n, width=40, height=30, seed=seed + 1)
    return str(root / "a"), str(root / "b")


def mixed_loader(two_sources, **keys):
    a, b = two_sources
    keys.setdefault("batch_size", 4)
    return brigade.Loader(
        sources=[{"name": "a", "data": a, "labels": "folder", "weight": 3},
                 {"name": "b", "data": b, "labels": "folder", "weight": 1}],
        environment=NO_LAUNCHER, threads=2, size=16, resize=16, seed=7, **keys)


def test_batches_say_each_samples_source_beside_its_label(two_sources):
    loader = mixed_loader(two_sources)
    assert loader.sources == ["a", "b"]
    assert loader.source_classes == [["a0", "a1"], ["b0", "b1", "b2"]]
    assert loader.classes == []
    files = loader.files
    counts = [0, 0]
    total = 0
    for batch in loader:
        assert batch["source"].dtype == torch.int32
        assert batch["source"].shape == batch["ids"].shape == batch["label"].shape
        for i, s, label in zip(batch["ids"].tolist(), batch["source"].tolist(),
                               batch["label"].tolist()):
            # The label is an index into the sample's own source's classes.
            folder = os.path.basename(os.path.dirname(files[i]))
            assert folder == loader.source_classes[s][label]
            assert files[i].startswith(two_sources[s] + os.sep)
            counts[s] += 1
            total += 1
    assert total == 24  # an epoch: as many draws as the sources have samples
    assert counts[0] > counts[1]
    assert len(loader) == 6


def test_source_and_label_are_exported_without_a_copy(two_sources):
    loader = mixed_loader(two_sources, output="dlpack")
    batch = next(iter(loader))
    for key, dtype in (("source", torch.int32), ("label", torch.int64)):
        column = batch[key]
        as_torch = torch.from_dlpack(column)
        assert as_torch.data_ptr() == column.data_ptr
        assert as_torch.dtype == dtype and column.shape == [4]


def test_state_dict_resumes_a_mix_exactly(two_sources):
    def ids(loader, most=None):
        out = []
        for n, batch in enumerate(loader):
            out.extend(zip(batch["ids"].tolist(), batch["source"].tolist()))
            if most is not None and n + 1 == most:
                break
        return out

    whole = ids(mixed_loader(two_sources))
    first = mixed_loader(two_sources)
    head = ids(first, most=2)
    state = first.state_dict()
    second = mixed_loader(two_sources)
    second.load_state_dict(state)
    assert len(second) == 4
    assert head + ids(second) == whole


def test_bad_sources_are_named(two_sources):
    a, _ = two_sources
    with pytest.raises(brigade.ConfigError, match=r"sources\[1\]\.weight: expected a finite "
                                                  r"number > 0, got -2"):
        brigade.Loader(sources=[{"data": a}, {"data": a, "weight": -2}],
                       environment=NO_LAUNCHER)
    with pytest.raises(brigade.ConfigError, match=r"sources and data"):
        brigade.Loader(sources=[{"data": a}], data=a, environment=NO_LAUNCHER)
    with pytest.raises(brigade.ConfigError, match=r"sources\[0\]: unknown key 'seed'"):
        brigade.Loader(sources=[{"data": a, "seed": 3}], environment=NO_LAUNCHER)
