"""Fixtures of the Python front end's tests: small datasets made with Brigade's own
synthetic-media generator (media/synthetic.h, through brigade.write_synthetic_images)."""

import os

import pytest

import brigade

# Every test sees an empty launch environment unless it gives one: a torchrun or Slurm
# variable of the machine running the tests must not change the rank.
NO_LAUNCHER: dict = {}

IMAGES = 48


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    """A folder of IMAGES small JPEGs (ids 0 … IMAGES-1 in sorted order)."""
    folder = tmp_path_factory.mktemp("images")
    brigade.write_synthetic_images(str(folder), IMAGES, width=64, height=48, seed=1)
    return str(folder)


@pytest.fixture(scope="session")
def images_with_corrupt(tmp_path_factory):
    """12 JPEGs and one corrupt file, img-00005.jpg (id 5): (folder, corrupt path)."""
    folder = tmp_path_factory.mktemp("corrupt")
    paths = brigade.write_synthetic_images(str(folder), 12, width=64, height=48, seed=2)
    with open(paths[5], "wb") as f:
        f.write(b"\xff\xd8 this is not a JPEG " * 20)
    return str(folder), paths[5]


def make_loader(data, **keys):
    keys.setdefault("threads", 2)
    keys.setdefault("stages", {"read": {"concurrency": 2}})
    return brigade.Loader(data=data, environment=NO_LAUNCHER, **keys)


@pytest.fixture
def loader_factory():
    return make_loader


def epoch_ids(loader):
    """The ids of one epoch's batches, in delivery order."""
    out = []
    for batch in loader:
        out.extend(int(i) for i in batch["ids"])
    return out
