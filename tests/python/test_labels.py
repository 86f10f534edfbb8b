"""Labels from class folders (labels="folder"): torchvision ImageFolder's classes, sample
order, paths and labels; batch["label"]; the folder listing's extensions and links."""

import os

import numpy as np
import pytest
import torch
from PIL import Image

import brigade
from conftest import NO_LAUNCHER, make_loader

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def write_image(path, seed, size=32, grey=False):
    """A small image of PIL's, in the format of the name's extension (grey for .pgm)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    ext = "." + os.path.basename(path).rsplit(".", 1)[1].lower()  # ".jpg" too
    if ext == ".pgm" or grey:
        image = Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8), "L")
    else:
        image = Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), "RGB")
    formats = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".ppm": "PPM", ".pgm": "PPM",
               ".bmp": "BMP", ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP"}
    image.save(path, formats[ext])


@pytest.fixture(scope="module")
def class_tree(tmp_path_factory):
    """Classes with odd names (a space, UTF-8, dots, "cat" vs "cat-big", a hidden one),
    nested folders sorting on both sides of their files, every extension in both cases,
    hidden files, files outside any class, a linked class folder and linked files and
    folders inside classes. Returns the root."""
    base = tmp_path_factory.mktemp("classes")
    root = str(base / "tree")
    outside = str(base / "outside")
    files = [
        "cat/1.jpg", "cat/10.JPG", "cat/2.jpeg", "cat/a b/x.png", "cat/a.b/y.ppm",
        "cat/a/z.bmp", "cat/a/deeper/w.webp", "cat/zz.tif", "cat/.hidden.jpg", "cat/.jpg",
        "cat-big/q.TIFF", "cat-big/r.pgm", "cat-big/sub/s.jpg",
        "dog house/é.jpg", "dog house/e.jpg", "dog house/z.png",
        "ünïcödé/ß.png", "ünïcödé/日本.jpg",
        "cat.old/v1.png",
        ".hidden class/h.jpg",
        "stray.jpg",  # no class: not listed, as ImageFolder
    ]
    for i, f in enumerate(files):
        write_image(os.path.join(root, f), i)
    for f in ["cat/notes.txt", "cat/jpg", "dog house/readme.md"]:  # not media
        with open(os.path.join(root, f), "w") as out:
            out.write("not an image")
    for i, f in enumerate(["linked/l1.jpg", "linked/inner/l2.png", "elsewhere/o.jpg"]):
        write_image(os.path.join(outside, f), 100 + i)
    os.symlink(os.path.join(outside, "linked"), os.path.join(root, "linked class"))
    os.symlink(os.path.join(outside, "elsewhere"), os.path.join(root, "cat", "link to elsewhere"))
    os.symlink(os.path.join(outside, "elsewhere", "o.jpg"), os.path.join(root, "dog house", "f.jpg"))
    return root


def test_class_folders_list_exactly_as_imagefolder(class_tree):
    datasets = pytest.importorskip("torchvision.datasets")
    reference = datasets.ImageFolder(class_tree)
    loader = make_loader(class_tree, labels="folder", batch_size=5, size=32, resize=32, seed=4)
    assert loader.classes == reference.classes
    assert "linked class" in loader.classes and ".hidden class" in loader.classes
    assert loader.files == [path for path, _ in reference.samples]
    assert any("link to elsewhere" in p for p in loader.files)
    # Every batch's labels are ImageFolder's targets of its ids (shuffled).
    seen = {}
    for batch in loader:
        assert batch["label"].dtype == torch.int64
        assert batch["label"].shape == batch["ids"].shape
        for i, label in zip(batch["ids"].tolist(), batch["label"].tolist()):
            seen[i] = label
    assert loader.stats()["counts"]["failed"] == 0
    assert sorted(seen) == list(range(len(reference.samples)))
    assert [seen[i] for i in sorted(seen)] == reference.targets
    assert list(seen) != sorted(seen)  # shuffled


def test_labels_are_exported_without_a_copy(class_tree):
    loader = make_loader(class_tree, labels="folder", batch_size=4, size=32, resize=32,
                         output="dlpack")
    batch = next(iter(loader))
    label = batch["label"]
    as_torch = torch.from_dlpack(label)
    assert as_torch.data_ptr() == label.data_ptr
    assert as_torch.dtype == torch.int64 and label.shape == [4]


def test_the_python_stage_sees_each_batch_with_its_labels(class_tree):
    datasets = pytest.importorskip("torchvision.datasets")
    targets = datasets.ImageFolder(class_tree).targets
    loader = make_loader(class_tree, labels="folder", batch_size=4, size=32, resize=32,
                         python_stage=lambda b: list(zip(b["ids"].tolist(),
                                                         b["label"].tolist())),
                         python_stage_threads=2)
    pairs = [pair for staged in loader for pair in staged]
    assert len(pairs) == len(targets)
    assert all(targets[i] == label for i, label in pairs)


def test_an_unlabelled_listing_follows_links_sorted_by_bytes_of_the_relative_path(class_tree):
    loader = make_loader(class_tree, batch_size=4, size=32, resize=32)
    assert loader.classes == []
    expected = []
    for top, _, names in os.walk(class_tree, followlinks=True):
        for name in names:
            if name.lower().endswith(IMAGE_EXTENSIONS):
                expected.append(os.path.relpath(os.path.join(top, name), class_tree))
    expected.sort(key=os.fsencode)
    assert [os.path.relpath(p, class_tree) for p in loader.files] == expected
    assert expected.index("cat-big/q.TIFF") < expected.index("cat/1.jpg")  # '-' < '/'
    assert "stray.jpg" in expected and "linked class/inner/l2.png" in expected
    assert "label" not in next(iter(loader))


def test_a_link_loop_is_an_error_naming_the_link(tmp_path):
    root = tmp_path / "loop"
    write_image(str(root / "a" / "x.jpg"), 0)
    os.symlink("..", root / "a" / "up")
    for keys in ({}, {"labels": "folder"}):
        with pytest.raises(brigade.ConfigError, match=r"a/up leads back to .*loop") as e:
            make_loader(str(root), **keys)
        assert e.value.key == "data"


def test_class_folder_errors_name_the_folder_and_the_classes(tmp_path):
    write_image(str(tmp_path / "flat" / "x.jpg"), 0)
    with pytest.raises(brigade.ConfigError, match="no class folders") as e:
        make_loader(str(tmp_path / "flat"), labels="folder")
    assert str(tmp_path / "flat") in str(e.value)
    write_image(str(tmp_path / "some" / "full" / "x.jpg"), 0)
    os.makedirs(tmp_path / "some" / "empty b")
    os.makedirs(tmp_path / "some" / "empty a" / "sub")
    with pytest.raises(brigade.ConfigError, match="class folder.s. empty a, empty b"):
        make_loader(str(tmp_path / "some"), labels="folder")
    listing = tmp_path / "list.txt"
    listing.write_text("some/full/x.jpg\n")
    with pytest.raises(brigade.ConfigError, match="labels: folder") as e:
        brigade.Loader(list=str(listing), labels="folder", environment=NO_LAUNCHER)
    assert e.value.key == "labels"
    manifest = tmp_path / "samples.csv"
    manifest.write_text("path,label\nsome/full/x.jpg,0\n")
    with pytest.raises(brigade.ConfigError, match="labels: folder") as e:
        brigade.Loader(manifest=str(manifest), labels="folder", environment=NO_LAUNCHER)
    assert e.value.key == "labels"
    with pytest.raises(brigade.ConfigError, match="labels"):
        make_loader(str(tmp_path / "some"), labels="folders")


def test_imagefolder_extensions_decode_as_their_png_twin(tmp_path):
    """.ppm, .pgm, .tif, .tiff and .bmp hold the same pixels as a PNG of them: Brigade's
    decode (FFmpeg for all but JPEG) gives the same batch rows."""
    root = tmp_path / "formats"
    pairs = {"rgb": [".ppm", ".tif", ".tiff", ".bmp"], "grey": [".pgm"]}
    for stem, exts in pairs.items():
        for ext in exts + [".png"]:
            write_image(str(root / (stem + ext)), 0, grey=stem == "grey")
    # TIFFs of LZW, deflate and PackBits compression: PIL's usual encodings.
    rgb = Image.open(root / "rgb.png")
    rgb.save(root / "rgb-lzw.tif", "TIFF", compression="tiff_lzw")
    rgb.save(root / "rgb-deflate.tif", "TIFF", compression="tiff_adobe_deflate")
    rgb.save(root / "rgb-packbits.tif", "TIFF", compression="packbits")
    loader = make_loader(str(root), batch_size=16, transform="none", size=32, shuffle=False)
    names = [os.path.basename(p) for p in loader.files]
    batch = next(iter(loader))
    assert "failed" not in batch, loader.stats()["recent_failures"]
    assert len(names) == 10 and batch["data"].shape[0] == 10
    rows = {names[i]: row for i, row in zip(batch["ids"].tolist(), batch["data"])}
    for name, row in rows.items():
        twin = "grey.png" if name.startswith("grey") else "rgb.png"
        assert torch.equal(row, rows[twin]), name


def test_an_undecodable_tif_is_a_failed_sample_naming_it(tmp_path):
    root = tmp_path / "bad"
    write_image(str(root / "good.png"), 0)
    with open(root / "bad.tif", "wb") as f:
        f.write(b"II*\x00" + b"\x07" * 200)  # a TIFF signature, then nonsense
    loader = make_loader(str(root), batch_size=4, transform="none", size=32, shuffle=False)
    batch = next(iter(loader))
    assert batch["failed"].tolist() == [0]
    failure = loader.stats()["recent_failures"][0]
    assert failure["path"] == str(root / "bad.tif") and failure["code"] == "bad_data"


def test_the_shard_conversion_keeps_every_image_with_its_imagefolder_label(class_tree,
                                                                           tmp_path):
    """examples/imagefolder_to_shards.sh: WebDataset's grouping (a sample's members
    adjacent, one key each, the key before the first dot), every ImageFolder sample
    once, its label in its .cls member; the same tree gives the same bytes."""
    import hashlib
    import subprocess
    import tarfile
    datasets = pytest.importorskip("torchvision.datasets")
    reference = datasets.ImageFolder(class_tree)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "imagefolder_to_shards.sh")
    for out in ("a", "b"):
        subprocess.run(["bash", script, class_tree, str(tmp_path / out), "4"], check=True,
                       capture_output=True, timeout=120)
    shards = sorted(f for f in os.listdir(tmp_path / "a") if f.endswith(".tar"))
    assert len(shards) == -(-len(reference.samples) // 4)
    assert (tmp_path / "a" / "classes.txt").read_text().splitlines() == reference.classes
    got, keys = [], []
    for shard in shards:
        a, b = (open(tmp_path / d / shard, "rb").read() for d in ("a", "b"))
        assert a == b, shard  # reproducible
        with tarfile.open(tmp_path / "a" / shard) as tar:
            members = tar.getmembers()
            assert all(m.isfile() for m in members)
            assert len(members) % 2 == 0
            for pair in zip(members[::2], members[1::2]):  # in name order: .bmp < .cls < .jpg
                cls, image = sorted(pair, key=lambda m: not m.name.endswith(".cls"))
                key, ext = image.name.split(".", 1)
                assert cls.name == key + ".cls" and "/" not in image.name
                assert ext == ext.lower() and "." + ext in IMAGE_EXTENSIONS
                keys.append(key)
                label = int(tar.extractfile(cls).read())
                got.append((hashlib.sha1(tar.extractfile(image).read()).hexdigest(), label))
    assert len(set(keys)) == len(keys)
    expected = [(hashlib.sha1(open(p, "rb").read()).hexdigest(), label)
                for p, label in reference.samples]
    assert sorted(got) == sorted(expected)
    assert [label for _, label in got] != sorted(label for _, label in got)  # shuffled
