"""brigade.Loader(device=...): batches copied by the job to a device and exported there.

The CPU device ("cpu") runs the whole device path here (page-locked host buffers, the
copy stage, normalize on the device, DLPack export of the device batch); the CUDA tests
run where Brigade was built with CUDA and a GPU is visible, and check what reached the
GPU with the CUDA runtime itself (ctypes), since Debian's torch has no CUDA.
"""

import ctypes
import ctypes.util
import gc

import numpy as np
import pytest
import torch

import brigade
from conftest import IMAGES, make_loader


def test_cpu_device_batches_equal_host_batches_and_are_exported_without_a_copy(images):
    host = make_loader(images, batch_size=8, seed=5, layout="nchw")
    dev = make_loader(images, batch_size=8, seed=5, layout="nchw", device="cpu", output="dlpack")
    count = 0
    for a, b in zip(host, dev):
        data = b["data"]
        assert isinstance(data, brigade.Tensor)
        assert data.device == "cpu" and data.__dlpack_device__() == (1, 0)
        assert data.dtype == "uint8" and data.shape == [8, 3, 224, 224]
        t = torch.from_dlpack(data)
        assert t.data_ptr() == data.data_ptr  # the device batch itself
        assert torch.equal(t, a["data"])
        assert torch.equal(torch.from_dlpack(b["ids"]), a["ids"])
        count += 1
        del t, data, b
    assert count == IMAGES // 8


def test_normalize_on_the_cpu_device_matches_the_host_normalize(images):
    host = make_loader(images, batch_size=8, seed=2, normalize="imagenet", layout="nchw")
    dev = make_loader(images, batch_size=8, seed=2, normalize="imagenet", layout="nchw",
                      device="cpu")
    half = make_loader(images, batch_size=8, seed=2, normalize="imagenet", layout="nchw",
                       device="cpu", normalize_dtype="float16")
    for a, b, h in zip(host, dev, half):
        assert b["data"].dtype == torch.float32 and h["data"].dtype == torch.float16
        assert tuple(b["data"].shape) == (8, 3, 224, 224)
        assert torch.allclose(a["data"], b["data"], atol=1e-5)
        assert torch.allclose(a["data"], h["data"].float(), atol=5e-3)


def test_holding_every_device_batch_raises_instead_of_waiting_for_ever(images):
    loader = make_loader(images, batch_size=4, device="cpu", epochs=2)
    it = iter(loader)
    kept = [next(it)["data"] for _ in range(4)]  # the job keeps 4 on the device
    with pytest.raises(RuntimeError, match="holds 4 batches on cpu"):
        next(it)
    del kept[:2]
    gc.collect()
    # Two kept and the loop's own batch (held while the for asks for the next): 3 of 4.
    rest = [int(i) for b in it for i in b["ids"]]
    assert len(rest) == IMAGES - 4 * 4
    del kept


def test_batches_kept_across_a_stop_stay_valid(images):
    loader = make_loader(images, batch_size=4, device="cpu", seed=1)
    it = iter(loader)
    kept = [next(it) for _ in range(2)]
    copies = [b["data"].clone() for b in kept]
    state = loader.state_dict()
    loader.stop()
    assert list(it) == []  # this iteration is over
    # The next iteration runs the next epoch on the same device memory: the 2 kept
    # batches and the loop's own leave it one to copy into.
    rest = [int(i) for b in loader for i in b["ids"]]
    assert sorted(rest) == list(range(IMAGES))
    resumed = make_loader(images, batch_size=4, device="cpu", seed=1)
    resumed.load_state_dict(state)
    left = [int(i) for b in resumed for i in b["ids"]]
    assert sorted(left + [int(i) for b in kept for i in b["ids"]]) == list(range(IMAGES))
    for b, c in zip(kept, copies):
        assert torch.equal(b["data"], c)


def test_cpu_device_in_the_python_stage_and_a_state_dict_round_trip(images):
    seen = []

    def stage(batch):
        return {"sum": float(batch["data"].float().sum()), "ids": batch["ids"]}

    loader = make_loader(images, batch_size=4, device="cpu", python_stage=stage,
                         python_stage_threads=6, seed=9)
    it = iter(loader)
    for _ in range(3):
        seen.extend(int(i) for i in next(it)["ids"])
    state = loader.state_dict()
    resumed = make_loader(images, batch_size=4, device="cpu", seed=9)
    resumed.load_state_dict(state)
    rest = [int(i) for b in resumed for i in b["ids"]]
    assert sorted(seen + rest) == list(range(IMAGES))


def test_a_host_tensor_and_a_cpu_device_batch_take_no_stream(images):
    batch = next(iter(make_loader(images, batch_size=4, device="cpu", output="dlpack")))
    with pytest.raises(ValueError, match="takes no stream"):
        batch["data"].__dlpack__(stream=1)
    with pytest.raises(ValueError, match="takes no stream"):
        batch["ids"].__dlpack__(stream=1)


def test_the_per_thread_default_stream_is_refused_saying_why(images):
    # Issue 22 item 7: stream 2 would make the memory's reuse wait on the dropping
    # thread's per-thread stream; refused on every device, so that CI sees it.
    batch = next(iter(make_loader(images, batch_size=4, device="cpu", output="dlpack")))
    with pytest.raises(ValueError, match="cudaStreamPerThread.*refused"):
        batch["data"].__dlpack__(stream=2)


def _cudart():
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12",
                 ctypes.util.find_library("cudart")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None


needs_gpu = pytest.mark.skipif(brigade.cuda_devices() == 0 or _cudart() is None,
                               reason="needs Brigade built with CUDA, a GPU and libcudart")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _dltensor(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _DLTensor.from_address(get(capsule, b"dltensor"))


@needs_gpu
def test_cuda_batches_are_exported_on_the_gpu_and_hold_the_host_batches_bytes(images):
    cudart = _cudart()
    host = make_loader(images, batch_size=8, seed=5, output="numpy")
    gpu = make_loader(images, batch_size=8, seed=5, device="cuda:0", output="dlpack")
    for a, b in zip(host, gpu):
        data = b["data"]
        assert data.device == "cuda:0" and data.__dlpack_device__() == (2, 0)
        with pytest.raises(ValueError, match="cudaStreamPerThread"):
            data.__dlpack__(stream=2)
        for stream in (None, 1, -1):
            capsule = data.__dlpack__(stream=stream)
            t = _dltensor(capsule)
            assert (t.device.device_type, t.device.device_id) == (2, 0)
            assert t.data == data.data_ptr and t.ndim == 4
            assert [t.shape[i] for i in range(4)] == [8, 224, 224, 3]
            del t, capsule
        with pytest.raises(ValueError, match="not a CUDA stream"):
            data.__dlpack__(stream=0)
        out = np.empty(a["data"].shape, np.uint8)
        assert cudart.cudaDeviceSynchronize() == 0
        # cudaMemcpy(dst, src, count, cudaMemcpyDeviceToHost = 2)
        assert cudart.cudaMemcpy(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(data.data_ptr),
                                 ctypes.c_size_t(out.nbytes), 2) == 0
        assert np.array_equal(out, a["data"])


@needs_gpu
def test_cuda_batches_reach_torch_when_torch_has_cuda(images):
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    host = make_loader(images, batch_size=8, seed=5)
    gpu = make_loader(images, batch_size=8, seed=5, device="cuda:0", normalize="imagenet")
    ref = make_loader(images, batch_size=8, seed=5, normalize="imagenet")
    for a, b, r in zip(host, gpu, ref):
        assert b["data"].is_cuda and b["ids"].device.type == "cpu"
        assert torch.allclose(b["data"].cpu(), r["data"], atol=1e-5)
        assert torch.equal(b["ids"], a["ids"])
