"""Manifests through the Python Loader (launch/loader/manifest.h): a CSV or JSON Lines
file names the samples; batch["meta"] carries the columns asked for, typed per column."""

import json
import os

import pytest

import brigade
from conftest import NO_LAUNCHER, make_loader


def write_csv(path, rows, header="path,label,caption,width"):
    with open(path, "w", newline="") as f:
        f.write(header + "\r\n")
        for row in rows:
            f.write(",".join(row) + "\r\n")


@pytest.fixture
def csv_manifest(images, tmp_path):
    """A CSV manifest of the images in reverse order: labels cat/dog, a caption with a
    comma and quotes, an integer width; paths relative to the manifest's folder."""
    names = sorted(os.listdir(images))
    rows = []
    for i, name in enumerate(reversed(names)):
        rel = os.path.relpath(os.path.join(images, name), tmp_path)
        rows.append([rel, "dog" if i % 3 else "cat", f'"a, ""{i}"""', str(100 + i)])
    path = tmp_path / "m.csv"
    write_csv(path, rows)
    return str(path), rows


def test_batch_meta_columns_are_typed_per_column(csv_manifest):
    path, rows = csv_manifest
    loader = make_loader(None, manifest=path, meta=["caption", "width"], batch_size=8,
                         shuffle=False, epochs=1)
    seen = {}
    for batch in loader:
        meta = batch["meta"]
        assert sorted(meta) == ["caption", "width"]
        assert len(meta["caption"]) == len(batch["ids"])
        for i, caption, width in zip(batch["ids"].tolist(), meta["caption"], meta["width"]):
            seen[i] = (caption, width)
    assert len(seen) == len(rows)
    for i in range(len(rows)):
        assert seen[i] == (f'a, "{i}"', 100 + i)
        assert isinstance(seen[i][1], int)


def test_a_column_with_one_non_number_stays_text(images, tmp_path):
    names = sorted(os.listdir(images))[:4]
    path = tmp_path / "m.jsonl"
    with open(path, "w") as f:
        for i, name in enumerate(names):
            score = 0.5 * i if i != 2 else None  # null: "" in the column, so it stays text
            f.write(json.dumps({"path": os.path.join(images, name), "score": score,
                                "ratio": 1.5 + i}) + "\n")
    loader = make_loader(None, manifest=str(path), meta="score,ratio", batch_size=4,
                         shuffle=False, epochs=1)
    (batch,) = list(loader)
    assert batch["meta"]["ratio"] == [1.5, 2.5, 3.5, 4.5]
    assert batch["meta"]["score"] == ["0.0", "0.5", "", "1.5"]


def test_without_meta_a_batch_has_no_meta_key(csv_manifest):
    path, rows = csv_manifest
    loader = make_loader(None, manifest=path, batch_size=64, epochs=1)
    (batch,) = list(loader)
    assert "meta" not in batch
    assert sorted(batch["ids"].tolist()) == list(range(len(rows)))


def test_bad_manifests_name_the_file_and_line(images, tmp_path):
    path = tmp_path / "bad.csv"
    write_csv(path, [["a.jpg", "1", "x", "1"], ["a.jpg", "2", "y", "2"]])
    with pytest.raises(brigade.ConfigError, match=r"bad.csv:3: duplicate path 'a.jpg' "
                                                  r"\(first at line 2\)") as e:
        make_loader(None, manifest=str(path))
    assert e.value.key == "manifest"
    write_csv(path, [["a.jpg", "1", "x", "1"]])
    with pytest.raises(brigade.ConfigError, match="no meta column 'nope'"):
        make_loader(None, manifest=str(path), meta=["nope"])
    with pytest.raises(brigade.ConfigError, match="meta: only a manifest"):
        make_loader(images, meta=["x"])
    with pytest.raises(brigade.ConfigError, match="manifest and data"):
        brigade.Loader(data=images, manifest=str(path), environment=NO_LAUNCHER)
