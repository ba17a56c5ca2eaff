"""A vendor's C management library called through ctypes, for vendors that publish no Python binding.

DCMI (Ascend), cndev (Cambricon), Hygon's DMI and the rest ship only a shared library and a C header.
The device manager's 60 MB budget leaves no room for a third-party binding package (gpustack-runtime's
detector costs 18 MB; see the README beside this file), and ctypes itself costs 0.25 MB, so each vendor
gets a small binding of its own on this module: the library is found among the vendor's documented
install paths, every function used is declared with its C prototype (so a wrong argument fails in
Python, not in the library), and a non-zero return code becomes ``CallError`` with the code. A binding
is a ``Binding`` subclass that says where its library lives, how it initialises and which prototypes it
declares; ``Library`` reads the usual answers (an unsigned or signed int through a pointer, text into a
caller's buffer, a query the driver may not offer) the same way for every vendor.

Only a vendor's binding module imports this one, and only when that vendor's cards are on the bus, so
a node pays for ctypes and for one vendor's library at most. Tests hand in a recorded library instead
of the real one: an object whose attributes are C-callable stand-ins (``recorded_function``) built from
the same prototypes, so the recorded answers pass through ctypes' real argument marshalling.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from gpustack_operator.device_manager.detector.vendor import CallError, LibraryUnavailableError

__all__ = ["Binding", "CallError", "Library", "Prototype", "load", "offered", "recorded_function", "text"]

Prototype = tuple[Any, Sequence[Any]]
"""(restype, argtypes) of one C function, as its vendor header declares it."""
B = TypeVar("B", bound="Binding")


def load(candidates: Iterable[str], label: str) -> Any:
    """The first of ``candidates`` (a soname or an absolute path) that loads; LibraryUnavailableError
    naming every path tried, and the loader's last complaint, otherwise."""
    tried, last = [], ""
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            tried.append(path)
            last = str(exc)
    raise LibraryUnavailableError(f"{label} cannot be loaded from {', '.join(tried)} (last: {last})")


class Library:
    """Calls into one loaded library with declared prototypes; the return code is checked."""

    def __init__(self, handle: Any, prototypes: Mapping[str, Prototype]) -> None:
        self._handle = handle
        self._prototypes = prototypes
        self._functions: dict[str, Callable[..., Any]] = {}

    def function(self, name: str) -> Callable[..., Any]:
        """The declared function ``name``; CallError(code None) when the library does not export it."""
        found = self._functions.get(name)
        if found is None:
            try:
                found = getattr(self._handle, name)
            except AttributeError as exc:
                raise CallError(name, None) from exc
            restype, argtypes = self._prototypes[name]
            found.restype, found.argtypes = restype, list(argtypes)
            self._functions[name] = found
        return found

    def call(self, name: str, *args: Any) -> None:
        """Call ``name``; CallError unless it answers 0."""
        code = self.function(name)(*args)
        if code != 0:
            raise CallError(name, int(code))

    def has(self, name: str) -> bool:
        return hasattr(self._handle, name)

    def offered(self, unsupported: Collection[int | None], name: str, *args: Any) -> bool:
        """Call ``name``; False when it answers one of ``unsupported`` (see ``offered``)."""
        return offered(unsupported, self.call, name, *args)

    def uint(self, name: str, *args: Any) -> int:
        """``name(*args, unsigned int *out)``'s answer."""
        value = ctypes.c_uint()
        self.call(name, *args, ctypes.byref(value))
        return value.value

    def sint(self, name: str, *args: Any) -> int:
        """``name(*args, int *out)``'s answer."""
        value = ctypes.c_int()
        self.call(name, *args, ctypes.byref(value))
        return value.value

    def text(self, name: str, length: int, *args: Any) -> str:
        """``name(*args, char *buffer, unsigned int length)``'s answer as text."""
        buffer = ctypes.create_string_buffer(length)
        self.call(name, *args, buffer, length)
        return text(buffer.raw)


class Binding:
    """One vendor library as a Python object: its prototypes, where it is installed, how it starts.

    A vendor binding sets ``PROTOTYPES`` and ``LABEL`` (`Iluvatar IXML (libixml.so)`, what a failed load
    names), and implements ``library_paths`` (the soname first, then the vendor's install paths, read when
    the library is opened) and ``init``; ``open`` loads, wraps and initialises it.
    """

    PROTOTYPES: ClassVar[Mapping[str, Prototype]]
    LABEL: ClassVar[str]

    def __init__(self, handle: Any) -> None:
        self._lib = Library(handle, self.PROTOTYPES)

    @classmethod
    def library_paths(cls) -> Sequence[str]:
        raise NotImplementedError

    def init(self) -> None:
        """The library's initialisation call; CallError when it refuses."""
        raise NotImplementedError

    @classmethod
    def open(cls: type[B], handle: Any = None) -> B:
        """``handle`` (default: the vendor library loaded from ``library_paths``), initialised;
        LibraryUnavailableError saying why the library cannot be loaded, CallError when it will not
        initialise."""
        binding = cls(handle if handle is not None else load(cls.library_paths(), cls.LABEL))
        binding.init()
        return binding


def offered(unsupported: Collection[int | None], call: Callable[..., object], *args: Any) -> bool:
    """``call(*args)``; False when it fails with one of the ``unsupported`` codes (the query does not exist
    on this driver or card, which says nothing against the card), CallError for any other failure."""
    try:
        call(*args)
    except CallError as exc:
        if exc.code in unsupported:
            return False
        raise
    return True


def recorded_function(prototype: Prototype, answer: Callable[..., int]) -> Any:
    """A C-callable ``answer`` with ``prototype``: ctypes marshals the arguments as for the real library
    (``answer`` receives ctypes pointers and fills ``pointer[0]`` or ``pointer.contents``)."""
    restype, argtypes = prototype
    return ctypes.CFUNCTYPE(restype, *argtypes)(answer)


def text(raw: bytes) -> str:
    """A C char array as text: up to the first NUL, undecodable bytes and control characters dropped."""
    value = raw.split(b"\0", 1)[0].decode("utf-8", errors="ignore")
    return "".join(ch for ch in value if ch.isprintable()).strip()
