"""Where parallel work runs: in this process, or on a Dask cluster of real worker processes.

The dominant cost of a sweep is embedding (all-MiniLM-L6-v2: about 10 passages per CPU-second on 2 cores), so the
embed stage splits the texts it must compute into shards and hands them to :class:`Workers`. Each shard writes its
vectors into the shared content-addressed cache itself, so a worker lost mid-shard costs only that shard: Dask
runs it again elsewhere, and segments already written are reused.

* :class:`InProcess` -- one shard after another, here (the default; no Dask needed).
* :class:`DaskWorkers` -- ``distributed``: a ``LocalCluster`` of ``n_workers`` processes (one thread each, so two
  model copies never fight over the same cores by accident), or an existing scheduler at ``address``. Every worker
  must see the ragbench home at the same path (a shared volume; see docs/scale-out.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ragbench.core.progress import log

#: seconds to reach an existing Dask scheduler (its first answer; the preflight has already seen it listen)
DASK_CONNECT_TIMEOUT_S = 10


class Workers(Protocol):
    def map(self, fn: Callable[[Any], Any], items: list, on_done: Callable[[Any], None] | None = None) -> list: ...

    def close(self) -> None: ...


class InProcess:
    """Runs every item here, in order."""

    def map(self, fn, items, on_done=None):
        out = []
        for item in items:
            out.append(fn(item))
            if on_done is not None:
                on_done(out[-1])
        return out

    def close(self) -> None:
        return None


class DaskWorkers:
    """A Dask distributed client: a new ``LocalCluster`` of ``n_workers`` processes, or the scheduler at
    ``address`` (``tcp://host:8786``). Results come back in item order; a task whose worker died is retried."""

    def __init__(self, n_workers: int = 2, address: str | None = None, retries: int = 2):
        from distributed import Client, LocalCluster

        self.retries = retries
        if address:
            self.cluster = None
            try:
                self.client = Client(address, timeout=f"{DASK_CONNECT_TIMEOUT_S}s")
            except OSError as e:  # distributed's "Timed out trying to connect": one line naming the address
                from ragbench.core.retry import ServerUnreachable

                raise ServerUnreachable(f"the Dask scheduler {address} does not answer within "
                                        f"{DASK_CONNECT_TIMEOUT_S} s: {str(e).splitlines()[0][:200]}") from None
        else:
            self.cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=40)
            self.client = Client(self.cluster)
        log.info("dask: %d worker(s) at %s", len(self.client.scheduler_info()["workers"]), self.client.scheduler.address)

    def map(self, fn, items, on_done=None):
        from distributed import as_completed

        futures = self.client.map(fn, list(items), pure=False, retries=self.retries)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list = [None] * len(futures)
        for future in as_completed(futures):
            out[index[future.key]] = future.result()
            if on_done is not None:
                on_done(out[index[future.key]])
        return out

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def open_workers(kind: str = "local", n_workers: int = 2, address: str | None = None) -> Workers:
    """``local`` -> :class:`InProcess`; ``dask`` -> :class:`DaskWorkers`."""
    if kind == "dask":
        return DaskWorkers(n_workers=n_workers, address=address)
    return InProcess()


def chunked(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
