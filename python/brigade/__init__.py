"""Brigade: a C++ data loader for training, driven from Python.

``brigade.Loader`` runs Brigade's job (sampler → read → batch → decode, the pipeline of
``brigade run``) in C++ threads and hands out its batches as dicts of tensors::

    loader = brigade.Loader(data="/data/train", batch_size=64, seed=3)
    for epoch in range(10):                 # each iteration runs the next epoch
        for batch in loader:
            images = batch["data"]          # uint8 [N, 224, 224, 3] (layout="nchw": [N, 3, 224, 224])
            ids = batch["ids"]              # int64 [N]: the samples' ids (index in the file list)
            labels = batch.get("label")     # int64 [N] with labels="folder": class index
            source = batch.get("source")    # int32 [N] with sources=[...]: the sample's source
            failed = batch.get("failed")    # int64 ids of samples that failed, when any did
            paths = [loader.files[i] for i in ids.tolist()]

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
import logging
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

#: Brigade's log lines (a sample that failed, a worker lost) go to this logger.
logger = logging.getLogger("brigade")

# spdlog's levels (trace … critical) as logging's.
_LEVELS = (5, logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL,
           logging.CRITICAL)


def _forward_log() -> None:
    """Hands the C++ side's waiting log lines to the ``brigade`` logger."""
    for level, message in _brigade.take_log():
        logger.log(_LEVELS[min(max(level, 0), 6)], "%s", message)


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


class _Iteration:
    """One iteration of a Loader (what ``iter(loader)`` returns): its batches, until the
    epoch ends, ``stop()`` is called, or a newer iteration of the loader starts."""

    def __init__(self, loader: "Loader", number: int) -> None:
        self._loader = loader
        self._number = number

    def __iter__(self) -> "_Iteration":
        return self

    def __next__(self) -> Any:
        if self._loader._iteration != self._number:
            raise StopIteration
        return self._loader.__next__()


class Loader:
    """Batches of Brigade's job, for a PyTorch training loop.

    Args:
        config: a TOML file of ``brigade run`` settings (paths in it relative to its folder).
        output: ``"torch"`` (default: torch tensors), ``"numpy"`` (arrays) or
            ``"dlpack"`` (brigade.Tensor objects, for any DLPack consumer). All share the
            C++ buffer.
        python_stage: a Python callable applied to each batch dict, whose result is
            what iteration yields (named so as not to clash with the ``transform`` key,
            the C++ image transform). The slow path: it runs as a stage of the
            engine (``"python_stage"`` in ``stats()``), ``python_stage_threads`` calls
            at once on C++ threads that take the GIL only to call it, so it helps only
            where the callable releases the GIL (torch, NumPy, I/O). Results keep batch
            order; what it raises is raised at its batch's place.
        python_stage_threads: threads calling ``python_stage`` (1 to 1024).
        environment: the launch environment read for rank and world size (default:
            ``os.environ``): torchrun's RANK/WORLD_SIZE, else Slurm's.
        demo: without ``data`` or ``list``, load Brigade's synthetic demo set (generated
            once under ~/.cache/brigade/demo); without it, no data is a ConfigError.
        **keys: settings named as the TOML keys (data, list, manifest (a CSV, TSV or
            JSON Lines table of samples; with manifest_format, path_column,
            label_column, classes, and meta=[columns]: see README, Manifests), labels
            ("none", "folder": the data folder's subfolders are the classes,
            ImageFolder's listing), kind, batch_size, epochs,
            seed, shuffle, tail, drop_last, order, threads, rank, world_size,
            max_failures, layout, roi_decode,
            transform ("eval", "train", "none"), interpolation ("bilinear",
            "bicubic": torchvision's InterpolationMode), size, resize, scale, ratio,
            flip_probability, normalize, normalize_mean, normalize_std, normalize_dtype,
            device ("cuda:N": batches copied to the GPU on Brigade's own stream and handed
            out there, see README; "cpu": the same path in host memory), checkpoint_dir,
            keep_checkpoints, launch_id, resume_from, sources=[{"data": DIR, "weight": 3,
            "labels": "folder", "name": "a"}, {"shards": [...], "weight": 1}] (several
            datasets mixed by weight: README, Mixing datasets), epoch_samples, stages={"read":
            {"concurrency": N}, "decode": {...}}, remote={"workers": [...], ...}); they
            override the config file's. None means "not given".

    Raises:
        ConfigError: a bad key or value (``key`` names it), an unreadable data folder.

    Each iteration (``for batch in loader``) runs one epoch: the one ``set_epoch``
    chose, else the next one, as DataLoader with a DistributedSampler whose epoch the
    loop advances. There is no epoch limit unless ``epochs`` is given (then, after the
    last one, iteration yields nothing unless ``set_epoch`` asks for another). Leaving
    a loop early (``break``) is fine: the next iteration runs the next epoch, and a
    ``state_dict()`` taken after the break resumes exactly where the loop left.

    Every rank yields the same number of batches per epoch (what DDP's synchronous
    step needs), as DistributedSampler: ``tail="pad"`` (default) repeats samples from
    the start of the epoch so every rank gets ceil(n / world_size) samples
    (DistributedSampler's ``drop_last=False``), ``tail="drop"`` leaves the tail out
    (its ``drop_last=True``); ``drop_last=True`` also drops each rank's last partial
    batch (DataLoader's ``drop_last``). ``tail="none"`` yields every sample exactly
    once and the ranks' counts differ by up to one batch: for evaluation, where results
    are gathered rather than stepped together.

    A sample that fails to read or decode is left out of its batch and listed in
    ``batch["failed"]`` (logged to the ``brigade`` logger); a batch whose every sample
    failed is still yielded, with 0 samples, so the ranks' counts stay equal (compute
    the loss so that an empty batch adds zero, e.g. ``reduction="sum"`` divided by the
    batch size asked for). Beyond ``max_failures`` iteration raises DecodeError (or
    PipelineError) naming the causes, as ``brigade run`` exits 1.

    With ``meta`` (a manifest's columns), ``batch["meta"]`` is a dict column -> list
    of the batch's values: ints when every value of the column in the dataset is an
    integer, floats when every one is a number, else str.

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
                 demo: bool = False,
                 **keys: Any) -> None:
        env = os.environ if environment is None else environment
        self._output = output
        self._iteration = 0
        try:
            self._impl = _brigade.Loader(
                os.fspath(config) if config is not None else "", _keywords_toml(keys),
                "brigade.Loader", [(str(k), str(v)) for k, v in env.items()],
                _converter(output), python_stage, int(python_stage_threads), bool(demo))
        finally:
            _forward_log()
        for key in self._impl.ignored_keys:
            warnings.warn(f"brigade.Loader: {key} is a `brigade run` setting and is ignored",
                          stacklevel=2)

    # -- iteration -------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        """A new iteration: the next epoch (see the class's docstring)."""
        try:
            self._impl.begin()
        finally:
            _forward_log()
        self._iteration += 1
        return _Iteration(self, self._iteration)

    def __next__(self) -> Any:
        """The next batch of the iteration in progress."""
        try:
            batch = self._impl.next()
        finally:
            _forward_log()
        if batch is None:
            raise StopIteration
        return batch

    def __len__(self) -> int:
        """Batches of the epoch in progress, else of the one the next iteration runs
        (after load_state_dict: what is left of the resumed epoch): this rank's samples
        of it divided by batch_size, rounded up (down with drop_last). Equal on every
        rank unless ``tail="none"``."""
        return int(self._impl.batches_in_epoch())

    def set_epoch(self, epoch: int) -> None:
        """Runs epoch ``epoch`` on the next iteration, as DistributedSampler.set_epoch
        does (its shuffle depends on (seed, epoch)); an epoch in progress is left. After
        load_state_dict, setting the saved epoch continues it where it stopped."""
        if epoch < 0:
            raise ValueError(f"set_epoch: expected an epoch >= 0, got {epoch}")
        self._impl.set_epoch(int(epoch))

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs (or the one in progress)."""
        return int(self._impl.epoch)

    def stop(self) -> None:
        """Ends the iteration in progress as a ``break`` would, from any thread: the loop
        gets no more batches (within 100 ms); the state dict covers exactly what was
        handed out, and the next iteration runs the next epoch."""
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
        try:
            self._impl.restore(files)
        finally:
            _forward_log()

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
    def classes(self) -> List[str]:
        """The class names of a labelled dataset, label ``i`` naming ``classes[i]`` (with
        ``labels="folder"``: the data folder's subfolders, sorted, as ImageFolder's
        ``classes``); empty for an unlabelled one."""
        return list(self._impl.classes)

    @property
    def sources(self) -> List[str]:
        """With ``sources=[...]`` (a mix): the sources' names in order, ``batch["source"]``
        holding indices into it; empty otherwise."""
        return list(self._impl.sources)

    @property
    def source_classes(self) -> List[List[str]]:
        """With ``sources=[...]``: each source's class names. A mixed sample's label is an
        index into its own source's classes (``source_classes[s][label]``), not into a
        shared list; ``classes`` is empty for a mix."""
        return [list(c) for c in self._impl.source_classes]

    @property
    def files(self) -> List[str]:
        """The dataset's files: a sample's id is its index here
        (``loader.files[i]`` for ``i`` in ``batch["ids"].tolist()``)."""
        return list(self._impl.files)
