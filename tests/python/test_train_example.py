"""examples/train_classifier.py under torchrun (2 ranks, gloo on the CPU) on the demo set:
a run checkpointed mid-epoch and resumed in fresh objects sees exactly the samples
(ids and labels) of the run that was not interrupted, on every rank."""

import os
import shutil
import socket
import subprocess
import sys

import pytest

import brigade
from conftest import NO_LAUNCHER

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "train_classifier.py")
# A hang must not pass unnoticed (a bound on a process, not a timing assertion).
TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_classes():
    """The demo set, generated before the ranks start (once per cache: about 30 s)."""
    return brigade.Loader(demo=True, labels="folder", environment=NO_LAUNCHER).classes


def test_the_example_resumes_mid_epoch_on_exactly_the_samples_it_left(demo_classes):
    assert demo_classes == [f"class-{c}" for c in range(10)]
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_", "RANK", "WORLD_SIZE", "MASTER_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    # --redirects 1 --tee 1: Debian 12's torchrun fails without them (see the example).
    cmd = [sys.executable, torchrun, "--redirects", "1", "--tee", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), EXAMPLE,
           "--check-resume", "--steps", "6", "--save-at", "3", "--batch-size", "16",
           "--threads", "1", "--eval-batches", "2"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resume check: OK" in r.stdout, r.stdout
    for rank in (0, 1):
        assert (f"rank {rank}: 6 steps straight vs 3 + checkpoint + 3 resumed" in r.stdout
                and "samples identical (96 ids" in r.stdout), r.stdout
    assert "eval of an untrained model: accuracy" in r.stdout, r.stdout
