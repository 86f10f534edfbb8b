"""Remote decode workers found through rank 0's directory, from Python: rank 0's loop can
end (and its process with it) before another rank has started, so its last epoch keeps
the directory until every rank has subscribed, as `brigade run` does (README, Remote
workers)."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import brigade

TOKEN = "python-directory-test-token"
BINARY = os.environ.get("BRIGADE_BINARY", "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_environment(rank: int, master_port: int) -> dict:
    return {"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(master_port), "BRIGADE_TOKEN": TOKEN}


RANK1 = textwrap.dedent("""
    import json, os, sys
    import brigade
    data, master_port = sys.argv[1], sys.argv[2]
    loader = brigade.Loader(data=data, batch_size=4, epochs=1, threads=1,
                            environment={"RANK": "1", "WORLD_SIZE": "2",
                                         "MASTER_ADDR": "127.0.0.1",
                                         "MASTER_PORT": master_port,
                                         "BRIGADE_TOKEN": os.environ["BRIGADE_TOKEN"]},
                            remote={"directory": "auto", "on_no_workers": "fail"})
    ids = [int(i) for batch in loader for i in batch["ids"]]
    print(json.dumps(ids))
""")


@pytest.mark.skipif(not os.path.exists(BINARY), reason="BRIGADE_BINARY (the brigade program) not set")
def test_rank0_keeps_the_directory_for_a_rank_that_starts_after_its_loop(images, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("BRIGADE_TOKEN", TOKEN)
    directory_port = free_port()
    master_port = directory_port - 1
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    worker = subprocess.Popen(
        [BINARY, "worker", "--threads", "1", "--join", f"127.0.0.1:{directory_port}"],
        env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / "worker.err", "w"), text=True)
    try:
        assert worker.stdout.readline(), "the worker printed no address"
        loader = brigade.Loader(data=images, batch_size=4, epochs=1, threads=1,
                                environment=launch_environment(0, master_port),
                                remote={"directory": "auto", "on_no_workers": "fail"})
        it = iter(loader)
        ids0 = []
        for _ in range(len(loader)):
            ids0.extend(int(i) for i in next(it)["ids"])
        # Rank 0 has had every batch of its last epoch; rank 1 starts only now.
        rank1 = subprocess.Popen([sys.executable, "-c", RANK1, images, str(master_port)],
                                 env=env, stdout=subprocess.PIPE,
                                 stderr=open(tmp_path / "rank1.err", "w"), text=True)
        # The end of the loop waits until rank 1 has subscribed, then the loader (and
        # with it the directory) goes, as at the end of a training script.
        with pytest.raises(StopIteration):
            next(it)
        del it, loader
        out, _ = rank1.communicate(timeout=120)
        assert rank1.returncode == 0, (tmp_path / "rank1.err").read_text()
        ids1 = json.loads(out)
        assert sorted(ids0 + ids1) == list(range(48))
        assert not set(ids0) & set(ids1)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_rebalance_is_refused_where_no_statistics_can_drive_it(images):
    with pytest.raises(brigade.ConfigError) as e:
        brigade.Loader(data=images, environment={"BRIGADE_TOKEN": TOKEN},
                       remote={"workers": ["127.0.0.1:1"], "rebalance": True})
    assert e.value.key == "remote.rebalance"
    assert "statistics" in str(e.value)
