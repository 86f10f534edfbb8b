"""Brigade: a C++ data loader for training, driven from Python.

``brigade.Loader`` runs Brigade's job (sampler → read → batch → decode, the pipeline of
``brigade run``) in C++ threads and hands out its batches as dicts of tensors::

    loader = brigade.Loader(data="/data/train", batch_size=64, seed=3)
    for epoch in range(10):
        loader.set_epoch(epoch)
        for batch in loader:
            images = batch["data"]          # uint8 [N, 224, 224, 3] (layout="nchw": [N, 3, 224, 224])
            ids = batch["ids"]              # int64 [N]: the samples' ids (index in the file list)
            failed = batch.get("failed")    # int64 ids of samples that failed, when any did

The tensors are the C++ batch buffers themselves, exported through DLPack (no copy);
a buffer returns to the loader's pool once every tensor made from it is gone. The GIL
is released while C++ works or waits; no Python runs per sample.

Settings are the TOML keys of ``brigade run`` (README): ``Loader(config="job.toml")``,
keyword arguments named as the keys (``batch_size=8``, ``stages={"decode":
{"concurrency": 2}}``), or both (keywords win). Rank and world size come from
torchrun's (or Slurm's) environment unless given.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import errors
from .errors import BrigadeError, CheckpointError, ConfigError, DecodeError, PipelineError
from ._brigade import Tensor, cuda_devices, write_synthetic_images
from . import _brigade

__all__ = [
    "Loader", "Tensor", "BrigadeError", "ConfigError", "CheckpointError", "PipelineError",
    "DecodeError", "write_synthetic_images", "cuda_devices", "STATE_FORMAT",
]

#: The ``format`` entry of a Loader's state dict.
STATE_FORMAT = "brigade.Loader/1"

_OUTPUTS = ("torch", "numpy", "dlpack")


def _toml_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (str, os.PathLike)):
        return json.dumps(os.fspath(value), ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(key, v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            items.append(f"{_toml_key(f'{key}.{k}', k)} = {_toml_value(f'{key}.{k}', v)}")
        return "{ " + ", ".join(items) + " }"
    raise ConfigError(f"{key}: expected a string, number, boolean, list or dict, "
                      f"got {type(value).__name__}", key)


def _toml_key(path: str, key: Any) -> str:
    if not isinstance(key, str) or not key or not all(c.isalnum() or c in "_-" for c in key):
        raise ConfigError(f"unknown key {path!r}", path)
    return key


def _keywords_toml(keys: Mapping[str, Any]) -> str:
    """The keyword arguments as a TOML document, one key per line (None: not given)."""
    return "".join(f"{_toml_key(k, k)} = {_toml_value(k, v)}\n"
                   for k, v in keys.items() if v is not None)


def _converter(output: str) -> Optional[Callable[[Tensor], Any]]:
    if output == "torch":
        import torch
        return torch.from_dlpack
    if output == "numpy":
        import numpy
        return numpy.from_dlpack
    if output == "dlpack":
        return None
    raise ConfigError(f"output: expected one of {', '.join(_OUTPUTS)}, got {output!r}", "output")


class Loader:
    """Batches of Brigade's job, for a PyTorch training loop.

    Args:
        config: a TOML file of ``brigade run`` settings (paths in it relative to its folder).
        output: ``"torch"`` (default: torch tensors), ``"numpy"`` (arrays) or
            ``"dlpack"`` (brigade.Tensor objects, for any DLPack consumer). All share the
            C++ buffer.
        python_stage: a Python callable applied to each batch dict, whose result is
            what iteration yields (named so as not to clash with the ``transform`` key,
            the C++ image transform). The slow path: it runs on
            ``python_stage_threads`` C++ threads that take the GIL only to call it, so
            it helps only where the callable releases the GIL (torch, NumPy, I/O).
            Results keep batch order.
        python_stage_threads: threads calling ``python_stage`` (1 to 1024).
        environment: the launch environment read for rank and world size (default:
            ``os.environ``): torchrun's RANK/WORLD_SIZE, else Slurm's.
        **keys: settings named as the TOML keys (data, list, kind, batch_size, epochs,
            seed, shuffle, order, threads, rank, world_size, max_failures, layout,
            transform ("eval", "train", "none"), size, resize, scale, ratio,
            flip_probability, normalize, normalize_mean, normalize_std, normalize_dtype,
            device ("cuda:N": batches copied to the GPU on Brigade's own stream and handed
            out there, see README; "cpu": the same path in host memory), checkpoint_dir,
            keep_checkpoints, launch_id, resume_from, stages={"read":
            {"concurrency": N}, "decode": {...}}, remote={"workers": [...], ...}); they
            override the config file's. None means "not given".

    Raises:
        ConfigError: a bad key or value (``key`` names it), an unreadable data folder.

    Iterating runs one epoch: the one ``set_epoch`` chose, else the next of the job
    (``epochs`` of them; after the last one iteration yields nothing unless
    ``set_epoch`` asks for another). Leaving a loop early and iterating again continues
    the same epoch. A sample that fails to read or decode is left out of its batch and
    listed in ``batch["failed"]``; beyond ``max_failures`` iteration raises DecodeError
    (or PipelineError) naming the causes, as ``brigade run`` exits 1.

    With ``device``, ``batch["data"]`` is on the device (``ids`` and ``failed`` stay on
    the host); torch.from_dlpack orders torch's current stream after Brigade's copy
    without a host wait. The loader keeps at most 4 batches on the device, those the
    loop holds included: keeping 4 alive makes the next iteration raise RuntimeError
    (``.clone()`` what must outlive its step).
    """

    def __init__(self, config: Optional[Union[str, os.PathLike]] = None, *,
                 output: str = "torch",
                 python_stage: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 python_stage_threads: int = 1,
                 environment: Optional[Mapping[str, str]] = None,
                 **keys: Any) -> None:
        env = os.environ if environment is None else environment
        self._output = output
        self._impl = _brigade.Loader(
            os.fspath(config) if config is not None else "", _keywords_toml(keys),
            "brigade.Loader", [(str(k), str(v)) for k, v in env.items()],
            _converter(output), python_stage, int(python_stage_threads))
        for key in self._impl.ignored_keys:
            warnings.warn(f"brigade.Loader: {key} is a `brigade run` setting and is ignored",
                          stacklevel=2)

    # -- iteration -------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        self._impl.begin()
        return self

    def __next__(self) -> Any:
        batch = self._impl.next()
        if batch is None:
            raise StopIteration
        return batch

    def __len__(self) -> int:
        """Batches of this rank's epoch (the next one, or the one in progress), at most:
        the epoch's samples for this rank divided by batch_size, rounded up; batches
        whose every sample failed are not handed out."""
        return int(self._impl.batches_in_epoch())

    def set_epoch(self, epoch: int) -> None:
        """Runs epoch ``epoch`` on the next iteration, as DistributedSampler.set_epoch
        does (its shuffle depends on (seed, epoch)). After load_state_dict, setting the
        saved epoch continues it where it stopped. Not while an epoch is in progress."""
        if epoch < 0:
            raise ValueError(f"set_epoch: expected an epoch >= 0, got {epoch}")
        self._impl.set_epoch(int(epoch))

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs (or the one in progress)."""
        return int(self._impl.epoch)

    def stop(self) -> None:
        """Ends the iteration in progress (any thread): the loop gets no more batches
        (within 100 ms); the pipeline stops and the next iteration continues the same
        epoch where it stopped (the state dict covers exactly what was handed out)."""
        self._impl.stop()

    # -- checkpoints -----------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """This rank's checkpoint for exactly the batches handed out so far, as a dict
        ``torch.save`` can store with the model: ``{"format", "rank", "world_size",
        "epoch", "checkpoint": bytes}`` (the bytes of a Brigade checkpoint file)."""
        data = self._impl.checkpoint_bytes()
        return {"format": STATE_FORMAT, "rank": self._impl.rank,
                "world_size": self._impl.world_size, "epoch": self.epoch,
                "checkpoint": data}

    def load_state_dict(self, state: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None:
        """Continues from a state dict: exactly where it stopped (none lost, none
        repeated) with this rank's own state at the same world size; at another world
        size pass every rank's state dict of one save (a list, e.g. gathered with
        ``torch.distributed.all_gather_object``, or ``{"ranks": [...]}``): the samples
        not yet handed out are re-partitioned among the new ranks.

        Raises:
            CheckpointError: corrupt bytes, states not of one save, an incomplete set.
            ConfigError: a state of another dataset, seed or shuffle.
        """
        if isinstance(state, Mapping) and "ranks" in state:
            states = list(state["ranks"])
        elif isinstance(state, Mapping):
            states = [state]
        else:
            states = list(state)
        files = []
        for i, s in enumerate(states):
            if not isinstance(s, Mapping) or s.get("format") != STATE_FORMAT:
                raise CheckpointError(
                    f"state_dict {i}: not a brigade.Loader state dict (format "
                    f"{STATE_FORMAT!r} expected)", "corrupt", "state_dict")
            data = s.get("checkpoint")
            if not isinstance(data, (bytes, bytearray)):
                raise CheckpointError(f"state_dict {i}: 'checkpoint' must be bytes",
                                      "corrupt", "state_dict")
            files.append(bytes(data))
        self._impl.restore(files)

    def write_checkpoint(self) -> str:
        """Writes this rank's checkpoint into ``checkpoint_dir`` as ``brigade run``
        does (``brigade run --resume-from`` continues it). Returns the file's path."""
        return self._impl.write_checkpoint()

    # -- figures ---------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """Per-stage figures of the epoch in progress (or the last): ``stages`` (name,
        tasks, failures, mean/p50/p90/p99 ms, starved_s, backpressured_s, occupancy,
        items_per_s, …), ``sink`` (data_readiness, consumer_wait_s, …), ``failures``,
        ``recent_failures``, ``elapsed_s`` and the job's ``counts`` (samples, batches,
        failed, filtered handed out)."""
        return self._impl.stats()

    @property
    def rank(self) -> int:
        return int(self._impl.rank)

    @property
    def world_size(self) -> int:
        return int(self._impl.world_size)

    @property
    def batch_size(self) -> int:
        return int(self._impl.batch_size)

    @property
    def files(self) -> List[str]:
        """The dataset's files: a sample's id is its index here."""
        return list(self._impl.files)
