"""The exceptions the explorer raises on purpose; anything else is a bug."""


class ExplorerError(Exception):
    """Base class: every message is meant to be shown to a user as is."""


class InvalidInput(ExplorerError, ValueError):
    """An argument or an uploaded array the explorer cannot take (the message says which and why)."""


class GPUUnavailable(ExplorerError, RuntimeError):
    """backend="cuda" was asked for, but no usable GPU (or CuPy, or NVRTC) is present."""


class TooLarge(ExplorerError, MemoryError):
    """The run would need more memory than the backend has free, or than the operator allows."""


class KernelFailed(ExplorerError, RuntimeError):
    """A CUDA launch failed or left output unwritten; the message names the variant and shape."""


class GPUContextLost(KernelFailed):
    """A fault poisoned the CUDA context: nothing more can run on the GPU until a restart."""


def shown(value: object, limit: int = 40, quoted: bool = True) -> str:
    """A value as a message quotes it (its repr, or its text), cut with its length said when long, so a
    hostile value from a file or a URL cannot flood the page."""
    try:
        text = repr(value) if quoted else str(value)
    except ValueError:  # an int past Python's 4,300 digits for text
        if not isinstance(value, int):
            raise
        text = f"a number of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
