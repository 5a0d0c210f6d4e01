"""The process's context, its devices and their default queues."""

import atexit
import ctypes
import contextlib
import threading
import weakref

from ._lib import lib, LkDeviceProps, LkDriverInfo, LkQueueOpts, LkTopologyInfo
from .errors import check

KINDS = {1: "reference", 2: "cpu", 3: "gpu", 4: "other"}


class _Context:
    """One lk_context for the process, created on first use and destroyed
    at exit after the queues (device memory goes with it)."""

    def __init__(self):
        self.handle = None
        self.alive = False
        self.lock = threading.Lock()
        self.devices = {}   # lk_device address -> Device
        self.queues = []    # every Queue made, destroyed before the context
        self.graphs = weakref.WeakSet()  # live Graphs, destroyed before their queues

    def get(self):
        if self.handle is None:
            with self.lock:
                if self.handle is None:
                    h = ctypes.c_void_p()
                    check(lib.lk_context_create(ctypes.byref(h)))
                    self.handle = h.value
                    self.alive = True
                    atexit.register(self.destroy)
        return self.handle

    def destroy(self):
        if not self.alive:
            return
        for g in list(self.graphs):
            g._destroy()
        self.alive = False
        for q in self.queues:
            q._destroy()
        self.queues.clear()
        lib.lk_context_destroy(self.handle)
        self.handle = None
        self.devices.clear()


CTX = _Context()


class Queue:
    """In-order work on one device (a CUDA stream on GPUs).  Use a queue
    from one thread at a time; Device.queue gives each thread its own."""

    def __init__(self, device, num_threads=0, native_stream=None):
        opts = LkQueueOpts(num_threads, native_stream)
        h = ctypes.c_void_p()
        check(lib.lk_queue_create(device._handle, ctypes.byref(opts), ctypes.byref(h)))
        self._handle = h.value
        self.device = device
        self._capture = None
        CTX.queues.append(self)

    @contextlib.contextmanager
    def capture(self):
        """Record the ops run on this queue inside the with block into a
        Graph (nothing runs then; each op is validated as usual):

            with dev.queue.capture() as g:
                lockstep.rmsnorm(x, out=y, device=dev)
            g.launch()     # runs them with the buffers' current contents

        The graph keeps every argument alive; change contents between
        launches, never shapes."""
        check(lib.lk_queue_capture_begin(self._handle))
        g = Graph(self)
        self._capture = g
        try:
            yield g
        finally:
            self._capture = None
            h = ctypes.c_void_p()
            st = lib.lk_queue_capture_end(self._handle, ctypes.byref(h))
            g._handle = h.value if st == 0 else None
        check(st)

    def sync(self):
        """Wait for the queue's work (a no-op on host-memory devices); an
        asynchronous failure is raised here."""
        check(lib.lk_queue_sync(self._handle))

    def _destroy(self):
        if self._handle:
            lib.lk_queue_destroy(self._handle)
            self._handle = None

    def __repr__(self):
        return f"<lockstep.Queue on {self.device.name}>"


class Graph:
    """Ops captured on a queue (Queue.capture), launched as many times as
    wanted: the same kernels with the same arguments, the same bits."""

    def __init__(self, queue):
        self.queue = queue
        self._handle = None
        self._keep = []   # the captured calls' arguments
        CTX.graphs.add(self)

    def launch(self, queue=None):
        """Run the graph on queue (default: the one it was captured on; any
        queue of the same device)."""
        q = queue or self.queue
        check(lib.lk_graph_launch(self._handle, q._handle))

    @property
    def ops(self):
        n = ctypes.c_int64()
        check(lib.lk_graph_info(self._handle, None, ctypes.byref(n)))
        return n.value

    @property
    def native(self):
        """True for a native graph (a CUDA graph), False for the core's
        recording."""
        nat = ctypes.c_int()
        check(lib.lk_graph_info(self._handle, ctypes.byref(nat), None))
        return bool(nat.value)

    def _destroy(self):
        h, self._handle = self._handle, None
        if h and CTX.alive:
            self.queue.sync()
            lib.lk_graph_destroy(h)
        self._keep = []

    def __del__(self):
        self._destroy()


class Device:
    """One device of the context: "ref", "cpu", "cpu:avx2", "cuda:0", ...
    Make one with lockstep.device(name)."""

    def __init__(self, handle):
        self._handle = handle
        p = LkDeviceProps()
        check(lib.lk_device_props_get(handle, ctypes.byref(p)))
        self.name = p.name.decode()
        self.description = p.description.decode()
        self.driver = p.driver.decode()
        self.kind = KINDS.get(p.kind, "other")
        self.host_memory = bool(p.host_memory)
        self.emulated = bool(p.emulated)
        self.numa_node = p.numa_node
        self.priority = p.priority
        self.max_threads = p.max_threads
        self.memory_bytes = p.memory_bytes
        self.pci_bus_id = p.pci_bus_id.decode()
        self._local = threading.local()

    @property
    def queue(self):
        """The calling thread's default queue on this device."""
        q = getattr(self._local, "queue", None)
        if q is None or q._handle is None:
            q = self._local.queue = Queue(self)
        return q

    def new_queue(self, num_threads=0, native_stream=None):
        """A queue of its own (num_threads: CPU worker threads, 0 for
        LOCKSTEP_NUM_THREADS or every core, never changes a bit;
        native_stream: on a GPU, a cudaStream_t to adopt, e.g.
        torch.cuda.current_stream().cuda_stream)."""
        return Queue(self, num_threads, native_stream)

    def sync(self):
        self.queue.sync()

    def __repr__(self):
        return f"<lockstep.Device {self.name}: {self.description}>"

    def __str__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, Device) and other._handle == self._handle

    def __hash__(self):
        return hash(self._handle)


def _wrap(handle):
    d = CTX.devices.get(handle)
    if d is None:
        d = CTX.devices[handle] = Device(handle)
    return d


def devices():
    """The names of every device the context found, in lk_device_get order."""
    ctx = CTX.get()
    out = []
    for i in range(lib.lk_device_count(ctx)):
        h = ctypes.c_void_p()
        check(lib.lk_device_get(ctx, i, ctypes.byref(h)))
        out.append(lib.lk_device_name(h.value).decode())
    return out


def device(name="auto"):
    """The Device of a name lk_device_find accepts ("auto", "ref", "cpu",
    "cpu:avx2", "cuda", "cuda:0", ...); a Device is returned as it is.
    NoDeviceError when there is none."""
    if isinstance(name, Device):
        return name
    ctx = CTX.get()
    h = ctypes.c_void_p()
    check(lib.lk_device_find(ctx, str(name).encode(), ctypes.byref(h)))
    return _wrap(h.value)


def drivers():
    """Every driver the context tried, in order: dicts with name, path
    ("" when built in), builtin, status (an LK_ status name), device_count
    and message (why a module was refused)."""
    ctx = CTX.get()
    out = []
    for i in range(lib.lk_context_driver_count(ctx)):
        d = LkDriverInfo()
        check(lib.lk_context_driver_info(ctx, i, ctypes.byref(d)))
        out.append({"name": d.name.decode(), "path": d.path.decode(),
                    "builtin": bool(d.builtin),
                    "status": lib.lk_status_string(d.status).decode(),
                    "device_count": d.device_count, "message": d.message.decode()})
    return out


def topology():
    """The machine as the library sees it: a dict of lk_topology_info."""
    t = LkTopologyInfo()
    check(lib.lk_context_topology(CTX.get(), ctypes.byref(t)))
    return {name: (getattr(t, name).decode() if name == "source" else getattr(t, name))
            for name, _ in LkTopologyInfo._fields_}


def auto_reason():
    """Why "auto" picks what it picks, one line."""
    return lib.lk_context_auto_reason(CTX.get()).decode()


_default = None


def set_default_device(name):
    """The device ops use when neither device= nor a GPU input names one
    (None: "auto", or "cpu" when "auto" is a GPU and the inputs host
    memory)."""
    global _default
    _default = None if name is None else device(name)


def default_device(host=True):
    if _default is not None:
        return _default
    d = device("auto")
    if host and not d.host_memory:
        d = device("cpu")
    return d
