"""``python3 -c CODE`` inside a simulated container image: CPython running PyTorch, as far as smokes use it.

The code is parsed with :mod:`ast` and walked by a small evaluator (never executed):
imports, assignments, ``print``, ``sys.argv``/``sys.exit``, comprehensions, arithmetic and
the parts of ``torch`` a GPU smoke touches. Anything else fails loudly (stricter than a
real interpreter), so a runbook never passes on code the simulator did not understand.

What torch does on a broken CUDA path follows its source and real captures:

- ``torch.cuda.is_available()`` is ``torch._C._cuda_getDeviceCount() > 0``; c10's
  ``device_count()`` (c10/cuda/CUDAFunctions.cpp) catches the CUDA error, emits
  ``TORCH_WARN("CUDA initialization: ", msg)`` and returns 0, so a broken path prints a
  UserWarning on stderr and returns False with exit status 0 (the captures in
  tests/fixtures/errors/cuda803_*, cuda804_* and torch-driver-too-old_*). With no driver
  at all (a container started without GPUs) the count is 0 without a warning.
- ``torch.cuda.device_count()`` asks NVML first (``_device_count_nvml`` in
  torch/cuda/__init__.py), so it still reports every GPU the container sees while CUDA
  itself is broken: a count alone proves nothing.
- Only a real CUDA call (a tensor on ``cuda:i``) runs ``_lazy_init`` and raises the
  RuntimeError (gpustack/gpustack#4678, NVIDIA/nccl-tests#264 for 802).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cockpit.sim.shell import Io

#: cudaGetErrorString for the errors a driver change can leave behind (CUDA runtime API docs)
CUDA_ERRORS = {
    802: "system not yet initialized",
    803: "system has unsupported display driver / cuda driver combination",
    804: "forward compatibility was attempted on non supported HW",
}
SITE = "/usr/local/lib/python3.12/dist-packages"  # vLLM's images: python3.12, dist-packages
UNEXPECTED = (
    "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
    "NumCudaDevices() that might have already set an error? Error {code}: {text}"
)
NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed "
    "a driver from http://www.nvidia.com/Download/index.aspx"
)


@dataclass
class CudaView:
    """What CUDA looks like from inside one container."""

    gpus: int  # devices the runtime passed in (NVML sees them); 0 without --gpus / a CDI device
    error: int | None  # the CUDA error every CUDA call returns (802, 803, 804), None when healthy
    torch_version: str
    torch_cuda: str


class PyError(Exception):
    """A Python exception the program did not catch: its traceback goes to stderr, exit 1."""

    def __init__(self, kind: str, message: str, frames: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind, self.message, self.frames = kind, message, frames


class Exit(Exception):
    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


class Unsupported(Exception):
    """Code the simulator does not model."""


@dataclass
class Tensor:
    shape: tuple[int, ...]
    fill: float  # every element has this value: enough for ones/zeros, matmul and sums
    device: str

    def __matmul__(self, other: Tensor) -> Tensor:
        if self.device != other.device:
            raise PyError(
                "RuntimeError", f"Expected all tensors to be on the same device, {self.device} and {other.device}"
            )
        inner = self.shape[-1] if self.shape else 1
        return Tensor((self.shape[0], other.shape[-1]), self.fill * other.fill * inner, self.device)

    def sum(self) -> Tensor:
        return Tensor((), self.fill * math.prod(self.shape), self.device)

    def item(self) -> float:
        return self.fill

    def __float__(self) -> float:
        return self.fill

    def __getitem__(self, _index: object) -> Tensor:
        return Tensor((), self.fill, self.device)


@dataclass
class Torch:
    """The ``torch`` module of the image, as one program sees it."""

    view: CudaView
    io: Io
    warned: bool = False
    initialised: bool = False
    version: Any = field(init=False)
    cuda: Any = field(init=False)

    def __post_init__(self) -> None:
        self.__version__ = self.view.torch_version
        self.version = _Namespace(cuda=self.view.torch_cuda)
        self.cuda = _Namespace(
            is_available=self.is_available,
            device_count=self.device_count,
            synchronize=self.synchronize,
            init=lambda: self._lazy_init(),
            get_device_name=lambda i=0: self._device(f"cuda:{i}") and "NVIDIA H100 80GB HBM3",
        )

    def _raw_count(self) -> int:
        if self.view.error is None:
            return self.view.gpus
        if self.view.gpus and not self.warned:  # TORCH_WARN once: c10 caches the count
            self.warned = True
            self.io.err(
                f"{SITE}/torch/cuda/__init__.py:180: UserWarning: CUDA initialization: "
                + UNEXPECTED.format(code=self.view.error, text=CUDA_ERRORS[self.view.error])
                + " (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)\n"
                "  return torch._C._cuda_getDeviceCount() > 0\n"
            )
        return 0

    def is_available(self) -> bool:
        return self._raw_count() > 0

    def device_count(self) -> int:
        return self.view.gpus if self.view.gpus else self._raw_count()  # NVML first

    def _lazy_init(self) -> None:
        if self.initialised:
            return
        frames = (f'  File "{SITE}/torch/cuda/__init__.py", line 372, in _lazy_init\n    torch._C._cuda_init()\n',)
        if not self.view.gpus:
            raise PyError("RuntimeError", NO_DRIVER, frames)
        if self.view.error is not None:
            text = UNEXPECTED.format(code=self.view.error, text=CUDA_ERRORS[self.view.error])
            raise PyError("RuntimeError", text, frames)
        self.initialised = True

    def _device(self, device: object) -> str:
        name = str(device or "cpu")
        if name == "cuda":
            name = "cuda:0"
        if name.startswith("cuda:"):
            self._lazy_init()
            index = int(name.split(":", 1)[1])
            if index >= self.view.gpus:
                raise PyError(
                    "torch.AcceleratorError",
                    "CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at "
                    "some other API call, so the stacktrace below might be incorrect.",
                )
        elif name != "cpu":
            raise PyError("RuntimeError", f"Expected one of cpu, cuda device type at start of device string: {name}")
        return name

    def synchronize(self, device: object = None) -> None:
        self._device(f"cuda:{device}" if isinstance(device, int) else (device or "cuda:0"))

    def _tensor(self, shape: tuple[int, ...], fill: float, device: object) -> Tensor:
        return Tensor(tuple(int(s) for s in shape), fill, self._device(device))

    def ones(self, *shape: int, device: object = None, dtype: object = None) -> Tensor:
        return self._tensor(shape, 1.0, device)

    def zeros(self, *shape: int, device: object = None, dtype: object = None) -> Tensor:
        return self._tensor(shape, 0.0, device)


class _Namespace:
    def __init__(self, **attrs: object) -> None:
        self.__dict__.update(attrs)


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class Program:
    """One ``python3 -c CODE ARG...`` run."""

    def __init__(self, code: str, argv: list[str], view: CudaView, io: Io) -> None:
        self.code, self.io = code, io
        torch = Torch(view, io)
        self.modules: dict[str, object] = {
            "torch": torch,
            "sys": _Namespace(argv=["-c", *argv], exit=self._exit),
            "os": _Namespace(environ={}),
        }
        self.torch = torch
        self.names: dict[str, object] = {
            "print": self._print,
            "int": int,
            "float": float,
            "str": str,
            "len": len,
            "range": range,
            "all": all,
            "any": any,
            "sum": sum,
            "min": min,
            "max": max,
            "bool": bool,
        }

    def _print(self, *values: object, sep: str = " ", end: str = "\n") -> None:
        self.io.out(sep.join(str(v) for v in values) + end)

    def _exit(self, code: object = None) -> None:
        raise Exit(code)

    def run(self) -> int:
        try:
            tree = ast.parse(self.code)
        except SyntaxError as exc:
            self.io.err(f'  File "<string>", line {exc.lineno}\n    {exc.text or ""}\nSyntaxError: {exc.msg}\n')
            return 1
        try:
            for statement in tree.body:
                self.statement(statement)
        except Exit as done:
            if done.code is None or done.code == 0:
                return 0
            if isinstance(done.code, int):
                return done.code
            self.io.err(f"{done.code}\n")  # sys.exit("message"): the message on stderr, status 1
            return 1
        except PyError as exc:
            self.io.err(
                'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
                + "".join(exc.frames)
                + f"{exc.kind}: {exc.message}\n"
            )
            return 1
        except Unsupported as exc:
            self.io.err(f"cockpit sim: python code not modelled by the simulator: {exc}\n")
            return 1
        return 0

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in self.modules:
                    raise PyError("ModuleNotFoundError", f"No module named '{alias.name}'")
                self.names[alias.asname or alias.name] = self.modules[alias.name]
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            value = self.expr(node.value)
            for target in node.targets:
                assert isinstance(target, ast.Name)
                self.names[target.id] = value
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        else:
            raise Unsupported(type(node).__name__)

    def expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise PyError("NameError", f"name '{node.id}' is not defined")
            return self.names[node.id]
        if isinstance(node, ast.Attribute):
            owner = self.expr(node.value)
            if not hasattr(owner, node.attr):
                raise Unsupported(f"attribute {node.attr}")
            return getattr(owner, node.attr)
        if isinstance(node, ast.Call):
            fn = self.expr(node.func)
            args = [self.expr(a) for a in node.args]
            kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
            return fn(*args, **kwargs)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.BoolOp):
            value: Any = None
            for part in node.values:
                value = self.expr(part)
                if isinstance(node.op, ast.And) != bool(value):
                    return value
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.expr(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.expr(node.operand)
        if isinstance(node, ast.Compare):
            left = self.expr(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.expr(right_node)
                if type(op) not in _COMPARE:
                    raise Unsupported(type(op).__name__)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.expr(node.body) if self.expr(node.test) else self.expr(node.orelse)
        if isinstance(node, ast.Subscript):
            return self.expr(node.value)[self.expr(node.slice)]
        if isinstance(node, ast.Tuple | ast.List):
            items = [self.expr(e) for e in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and len(node.generators) == 1:
            gen = node.generators[0]
            if not isinstance(gen.target, ast.Name) or gen.ifs:
                raise Unsupported("comprehension form")
            out = []
            for item in self.expr(gen.iter):
                self.names[gen.target.id] = item
                out.append(self.expr(node.elt))
            return out
        if isinstance(node, ast.JoinedStr):
            return "".join(
                str(self.expr(v.value)) if isinstance(v, ast.FormattedValue) else str(self.expr(v)) for v in node.values
            )
        raise Unsupported(type(node).__name__)


def python(argv: list[str], view: CudaView, io: Io) -> int:
    """``python3 ARGS`` in the image: ``-c CODE [ARG...]`` runs; anything else is not modelled."""
    args = argv[1:]
    if args[:1] == ["-c"] and len(args) >= 2:
        return Program(args[1], args[2:], view, io).run()
    if args[:1] in (["--version"], ["-V"]):
        io.out("Python 3.12.11\n")
        return 0
    target = args[0] if args else "<stdin>"
    io.err(f"cockpit sim: python3 {target}: only 'python3 -c CODE' is modelled\n")
    return 2
