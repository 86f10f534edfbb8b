from os import PathLike
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import (BrigadeError as BrigadeError, CheckpointError as CheckpointError,
                     ConfigError as ConfigError, DecodeError as DecodeError,
                     PipelineError as PipelineError)

STATE_FORMAT: str

class Tensor:
    """A batch tensor in C++ memory, exported through DLPack without a copy."""
    def __dlpack__(self, stream: Optional[int] = ...) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def buffer_ptr(self) -> int: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...

Batch = Dict[str, Any]

class Loader:
    def __init__(self, config: Optional[Union[str, PathLike[str]]] = ..., *,
                 output: str = ...,
                 python_stage: Optional[Callable[[Batch], Any]] = ...,
                 python_stage_threads: int = ...,
                 environment: Optional[Mapping[str, str]] = ...,
                 demo: bool = ...,
                 data: Optional[Union[str, PathLike[str]]] = ...,
                 list: Optional[Union[str, PathLike[str]]] = ...,
                 kind: Optional[str] = ...,
                 batch_size: Optional[int] = ...,
                 epochs: Optional[int] = ...,
                 seed: Optional[int] = ...,
                 shuffle: Optional[bool] = ...,
                 tail: Optional[str] = ...,
                 drop_last: Optional[bool] = ...,
                 order: Optional[str] = ...,
                 threads: Optional[int] = ...,
                 rank: Optional[int] = ...,
                 world_size: Optional[int] = ...,
                 max_failures: Optional[Union[int, str]] = ...,
                 layout: Optional[str] = ...,
                 transform: Optional[str] = ...,
                 size: Optional[int] = ...,
                 resize: Optional[int] = ...,
                 scale: Optional[Sequence[float]] = ...,
                 ratio: Optional[Sequence[float]] = ...,
                 flip_probability: Optional[float] = ...,
                 normalize: Optional[str] = ...,
                 normalize_mean: Optional[Sequence[float]] = ...,
                 normalize_std: Optional[Sequence[float]] = ...,
                 checkpoint_dir: Optional[Union[str, PathLike[str]]] = ...,
                 keep_checkpoints: Optional[int] = ...,
                 launch_id: Optional[str] = ...,
                 resume_from: Optional[Union[str, PathLike[str]]] = ...,
                 stages: Optional[Mapping[str, Mapping[str, int]]] = ...,
                 remote: Optional[Mapping[str, Any]] = ...,
                 **keys: Any) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __next__(self) -> Any: ...
    def __len__(self) -> int: ...
    def set_epoch(self, epoch: int) -> None: ...
    @property
    def epoch(self) -> int: ...
    def stop(self) -> None: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None: ...
    def write_checkpoint(self) -> str: ...
    def stats(self) -> Dict[str, Any]: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def classes(self) -> List[str]: ...
    @property
    def files(self) -> List[str]: ...

def cuda_devices() -> int:
    """GPUs this process can use through Brigade's CUDA build (0 without one)."""
    ...

def write_synthetic_images(folder: str, count: int, width: int = ..., height: int = ...,
                           seed: int = ..., codec: str = ...) -> List[str]:
    """Writes `count` synthetic images (media/synthetic.h: textured, noisy; JPEG quality
    90 4:2:0, or PNG) named img-00000.jpg … into `folder`; returns their paths. Image i
    has seed `seed + i`."""
    ...
