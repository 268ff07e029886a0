"""Work queues of the emulator's asynchronous mode: one FIFO and one worker thread per emulated stream.

With ``$CONFORMANCE_EMULATOR_ASYNC=1`` (:data:`neuron_conformance.emulator._state.ENV_ASYNC`) the kernels of the
emulated ``neuron`` device do not run on the calling thread: :mod:`.async_ops` submits each one as a job to
the :class:`WorkQueue` of the current stream and returns. A queue's worker runs its jobs in submission order,
as a device runs the kernels of one stream in order (CUDA semantics note, "Asynchronous execution": "each
device stream ... operations are executed in the order they are created"). Across queues nothing is ordered
except by the wait jobs :meth:`WorkQueue.wait_job` submits (``Stream.wait_event`` / ``wait_stream``).

Positions are counted per queue: :attr:`WorkQueue.enqueued` is the number of jobs submitted,
:attr:`WorkQueue.completed` the number the worker has finished. An event recorded on a queue is the pair
``(queue, enqueued at record time)``; it has completed once ``completed`` reaches that number.

A job that raises keeps the queue going; the exception is kept and re-raised on the host by the next
synchronizing call (:func:`synchronize_all`, :meth:`WorkQueue.synchronize`, a blocking copy), the way CUDA
reports an asynchronous kernel error at a later API call.

Fault switches (:data:`FAULTS`, set through :mod:`.faults`): ``skip_waits`` makes every host wait return at
once without flushing the pending launches (a ``synchronize`` or blocking copy that does not wait), ``events_do_not_order`` makes the wait jobs
no-ops (``wait_event`` / ``wait_stream`` that do not order).

Same computation as the synchronous mode: a job runs with the intra-op thread count
(``torch.get_num_threads()``) its issuing thread had when it was submitted. With OpenMP (torch's CPU
backend) that count is per thread: ``torch.set_num_threads`` sets the calling thread's OpenMP ICV, and a
thread takes the process-wide value only once, at its first parallel region (``at::init_num_threads``,
aten/src/ATen/ParallelOpenMP.cpp). A worker that ran a job before the harness shared the cores between
pytest-xdist workers (:mod:`neuron_conformance.conformance.pytest_plugin.threads`) kept the machine's width, and
reductions whose order depends on the thread count rounded differently from the synchronous mode
(a float32 sum of 2^20 + 7 elements, ``layer_norm``'s backward, which keeps one partial sum per thread,
found by a sync/async comparison of the op suites). The worker sets its own count before such a job.

Locking: one lock for all queues, and per queue a condition for its worker (jobs arrived) and one for
waiters (jobs finished), so a submission wakes only that queue's worker (and only every :data:`BATCH`
jobs, or at a wait) and a finished job only those waiting on that queue, once it reaches their position (with one condition for every queue, each submission woke every idle stream's
worker: a process that had created many streams spent its time switching between them).
"""

from __future__ import annotations

import collections
import itertools
import threading
import time

import torch

_lock = threading.Lock()
"""Guards every queue's jobs and counters; each queue's two conditions are built on it."""
BATCH = 64
"""Jobs a queue collects before its worker is woken without a wait or query. Launches are batched, as a
driver batches kernel launches: a worker woken at every submission fought the issuing thread for the GIL at
every job (CPython hands the GIL over only every ``sys.getswitchinterval()``, 5 ms), which made the
asynchronous op suites several times slower than the synchronous ones. Any wait (``synchronize``, a
blocking copy, ``Event.synchronize``, a ``wait_event`` of another stream) or query (``Stream.query``,
``Event.query``) wakes the worker for everything pending, so no program waits on a batch forever."""
_get_threads = torch.get_num_threads
_set_threads = torch.set_num_threads

FAULTS = {"skip_waits": False, "events_do_not_order": False, "reuse_ignores_record_stream": False}
"""Injected misbehaviour of the asynchronous mode (tests only, see :mod:`.faults`); all False normally."""

_errors: list[BaseException] = []
"""Exceptions raised by jobs and not yet reported on the host."""

_ids = itertools.count(1)
_queues: dict[int, "WorkQueue"] = {}


class WorkQueue:
    """One emulated stream: a FIFO of jobs (callables without arguments) run by a daemon worker thread.

    Attributes:
        stream_id: the id the stream carries through the dispatcher (``torch.Stream.stream_id``); 0 is the
            default stream.
        priority: the priority it was created with (recorded only; one worker per queue).
        enqueued: jobs submitted so far (int); completed: jobs finished so far (int).
    """

    def __init__(self, stream_id: int, priority: int = 0) -> None:
        self.stream_id = stream_id
        self.priority = priority
        self.enqueued = 0
        self.completed = 0
        self._jobs: collections.deque = collections.deque()  # (job, intra-op threads of the issuer)
        self._work = threading.Condition(_lock)  # the worker waits here for jobs
        self._done = threading.Condition(_lock)  # host waits and other queues' wait jobs wait here
        self._targets: list[int] = []  # positions waited for on _done (a finished job wakes them only then)
        self._go = False  # the worker may run: kicked, or BATCH jobs pending; cleared when it runs dry
        self._thread: threading.Thread | None = None
        self._running = None

    def submit(self, job) -> int:
        """Append ``job`` and return its position (the value of :attr:`enqueued` after it).

        The job will run with the calling thread's current ``torch.get_num_threads()`` (module docstring),
        once the worker is woken: when :data:`BATCH` jobs are pending or somebody waits for or queries the
        queue (:meth:`kick`).
        """
        threads = _get_threads()
        with _lock:
            self.enqueued += 1
            self._jobs.append((job, threads))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"neuron-stream-{self.stream_id}", daemon=True)
                self._thread.start()
            if not self._go and len(self._jobs) >= BATCH:
                self._go = True
                self._work.notify()
            return self.enqueued

    def kick(self) -> None:
        """Wake the worker for the jobs pending so far (every wait and query does; see :data:`BATCH`)."""
        if self._go or not self._jobs:
            return
        with _lock:
            if not self._go and self._jobs:
                self._go = True
                self._work.notify()

    def _loop(self) -> None:
        jobs, work, done, targets = self._jobs, self._work, self._done, self._targets
        while True:
            with _lock:
                while not (self._go and jobs):
                    if not jobs:
                        self._go = False
                    work.wait()
                job, threads = jobs.popleft()
                self._running = job
            try:
                if _get_threads() != threads:
                    _set_threads(threads)
                job()
            except BaseException as exc:  # kept for the host, like an asynchronous kernel error
                with _lock:
                    _errors.append(exc)
            finally:
                del job
            with _lock:
                self.completed += 1
                self._running = None
                if targets and self.completed >= min(targets):
                    done.notify_all()

    def _wait_done(self, position: int) -> None:
        """Block (``_lock`` held) until the worker has finished the job at ``position``."""
        self._targets.append(position)
        try:
            while self.completed < position:
                self._done.wait()
        finally:
            self._targets.remove(position)

    def query(self) -> bool:
        """True when no work is left: every job has finished, or only waits already satisfied remain
        (a device stream whose last commands are waits on completed events has nothing to do)."""
        self.kick()
        with _lock:
            if self.completed >= self.enqueued:
                return True
            pending = [j for j, _t in self._jobs] + ([self._running] if self._running is not None else [])
        return all(getattr(j, "satisfied", None) is not None and j.satisfied() for j in pending)

    def passed(self, position: int) -> bool:
        """True once the worker has finished the job at ``position`` (and every earlier one); when it has
        not, the worker is woken (an ``Event.query`` polling loop makes progress)."""
        if self.completed >= position:
            return True
        self.kick()
        return False

    def wait_for(self, position: int) -> None:
        """Block the host until :meth:`passed` is true for ``position``, then report job errors.

        Raises:
            BaseException: the first exception a job of any queue raised since the last report.
        """
        if self.completed < position:
            if FAULTS["skip_waits"]:
                # The faulty wait neither waits nor flushes the pending launches: the host reads memory no
                # kernel has written yet. Not kicking makes that certain rather than a race with the worker
                # (a kicked worker sometimes finished a small kernel before the host read it).
                raise_errors()
                return
            self.kick()
            with _lock:
                self._wait_done(position)
        raise_errors()

    def synchronize(self) -> None:
        """Wait for every job submitted so far (``Stream.synchronize``)."""
        self.wait_for(self.enqueued)

    def wait_job(self, other: "WorkQueue", position: int) -> int:
        """Submit a job that holds this queue until ``other`` has passed ``position`` (``wait_event``)."""
        if other is self:
            return self.enqueued  # a queue is ordered with itself

        def wait() -> None:
            if FAULTS["events_do_not_order"]:
                return
            other.kick()
            with _lock:
                other._wait_done(position)

        wait.satisfied = lambda: other.completed >= position
        return self.submit(wait)

    def __repr__(self) -> str:
        return f"<neuron WorkQueue id={self.stream_id} enqueued={self.enqueued} completed={self.completed}>"


def raise_errors() -> None:
    """Re-raise (once) the first exception a job raised since the last call; the rest are dropped.

    Raises:
        BaseException: that exception, with a note naming the asynchronous mode.
    """
    if not _errors:
        return
    with _lock:
        if not _errors:
            return
        exc = _errors[0]
        _errors.clear()
    exc.add_note(
        "neuron emulator: raised by a kernel that ran asynchronously on a stream worker "
        "($CONFORMANCE_EMULATOR_ASYNC=1); reported at this synchronizing call"
    )
    raise exc


DEFAULT = WorkQueue(0)
_queues[0] = DEFAULT
_tls = threading.local()


def new_queue(priority: int = 0) -> WorkQueue:
    """A fresh queue with the next stream id (``torch.Stream(device="neuron")``)."""
    q = WorkQueue(next(_ids), priority)
    _queues[q.stream_id] = q
    return q


def queue_by_id(stream_id: int) -> WorkQueue:
    """The queue of ``stream_id`` (as carried by a ``torch.Stream`` through the dispatcher).

    Raises:
        ValueError: no emulated stream has that id.
    """
    try:
        return _queues[stream_id]
    except KeyError:
        raise ValueError(f"neuron emulator: no stream with stream_id={stream_id} exists") from None


def current() -> WorkQueue:
    """The current stream's queue of the calling thread (the default stream unless set)."""
    return getattr(_tls, "queue", DEFAULT)


def set_current(q: WorkQueue) -> None:
    """Make ``q`` the calling thread's current stream."""
    _tls.queue = q


def synchronize_all() -> None:
    """Wait for every job of every queue (``torch.accelerator.synchronize``), then report job errors."""
    for q in list(_queues.values()):
        q.synchronize()
    raise_errors()


def idle() -> bool:
    """True when no queue has unfinished jobs."""
    with _lock:
        return all(q.completed >= q.enqueued for q in _queues.values())


def now() -> float:
    """The clock event timestamps use: ``time.perf_counter()`` seconds, read by the worker running the job."""
    return time.perf_counter()
