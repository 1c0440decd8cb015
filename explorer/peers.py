"""The peers the harness times beside the kernels, by name (SOFTMAX_PEER_LABELS, PEER_NAMES: CuPy's own cupyx,
timed in explorer.bench, and torch's ecosystem), and the torch-ecosystem ones themselves, each used when it imports
and labelled with its version.

Softmax: torch.softmax, QuACK (`quack-kernels`, CuTe DSL: `quack.softmax.softmax_fwd`) and Liger
(`liger-kernel`, Triton: `LigerSoftmaxFunction`). Top-k: torch.softmax then torch.topk, and the best
formulation without a fused kernel, torch.topk on the logits with torch.logsumexp ("torch_lse").
None is required: requirements-peers.txt lists them, and without torch there are no peers here.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .backends import cuda
from .topk import TORCH_TOPK_LABELS, TORCH_TOPK_PASSES, torch_topk_bytes

# every softmax peer the harness times, in the order tables and charts list them: what each calls, in words
# (cupyx is CuPy's own, timed by explorer.bench; the rest are torch's ecosystem, below)
SOFTMAX_PEER_LABELS = {
    "cupyx": "cupyx.scipy.special.softmax(x, axis=1)",
    "torch": "torch.softmax(x, dim=1, out=y)",
    "quack": "quack.softmax.softmax_fwd(x)",
    "liger": "LigerSoftmaxFunction.apply(x)",
}
PEER_NAMES = tuple(dict.fromkeys((*SOFTMAX_PEER_LABELS, *TORCH_TOPK_LABELS)))  # softmax's, then top-k's


@dataclass(frozen=True)
class Peer:
    name: str
    version: str | None
    label: str  # what it calls, in words
    run: Callable[[Any, Any], Any]  # (tx, ty) torch tensors -> the output tensor (ty when it writes there)


@dataclass(frozen=True)
class TopkPeer:
    name: str
    version: str | None
    label: str
    run: Callable[[Any], tuple[Any, Any]]  # tx -> (values, int64 indices), descending
    passes: int  # logits-sized passes through memory the formulation needs at least (reads and writes)

    def bytes_moved(self, rows: int, cols: int, k: int, dtype: str) -> int:
        return torch_topk_bytes(self.passes, rows, cols, k, dtype)


def torch_module():
    """torch when it imports and sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def as_torch(x, dtype: str):
    """A CuPy array as a torch tensor on the same memory (bfloat16 arrives as its uint16 bits)."""
    torch = torch_module()
    t = torch.from_dlpack(x)
    return t.view(torch.bfloat16) if dtype == "bfloat16" else t


def as_cupy(t, dtype: str):
    """A torch tensor as a CuPy array on the same memory (bfloat16 as its uint16 bits, as the harness keeps it)."""
    if dtype == "bfloat16":
        return cuda.cp.from_dlpack(t.view(torch_module().int16)).view(cuda.cp.uint16)
    return cuda.cp.from_dlpack(t)


def softmax_peers() -> list[Peer]:
    """torch.softmax, and QuACK and Liger where they import."""
    torch = torch_module()
    if torch is None:
        return []

    def torch_softmax(tx, ty):
        torch.softmax(tx, dim=1, out=ty)
        return ty

    peers = [Peer("torch", torch.__version__, SOFTMAX_PEER_LABELS["torch"], torch_softmax)]
    try:
        from quack.softmax import softmax_fwd
    except Exception:  # not installed, or its DSL does not load here: no QuACK row
        pass
    else:
        peers.append(
            Peer("quack", version("quack-kernels"), SOFTMAX_PEER_LABELS["quack"], lambda tx, ty: softmax_fwd(tx))
        )
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except Exception:  # not installed, or Triton missing: no Liger row
        pass
    else:
        peers.append(
            Peer(
                "liger",
                version("liger-kernel"),
                SOFTMAX_PEER_LABELS["liger"],
                lambda tx, ty: LigerSoftmaxFunction.apply(tx),
            )
        )
    return peers


def topk_peers(k: int) -> list[TopkPeer]:
    """torch.topk(torch.softmax(x)) and torch_lse: topk of the logits, exp(v - logsumexp(x))."""
    torch = torch_module()
    if torch is None:
        return []

    def softmax_then_topk(tx):
        return torch.topk(torch.softmax(tx, dim=1), k, dim=1)

    def topk_lse(tx):
        v, i = torch.topk(tx, k, dim=1)
        return torch.exp(v - torch.logsumexp(tx, -1, keepdim=True)), i

    return [
        TopkPeer(name, torch.__version__, TORCH_TOPK_LABELS[name], run, TORCH_TOPK_PASSES[name])
        for name, run in (("torch", softmax_then_topk), ("torch_lse", topk_lse))
    ]
