"""How GPU failures are reported (no GPU needed: the CUDA errors are simulated)."""

import pytest

import explorer
from explorer.backends import cuda


@pytest.fixture(autouse=True)
def fresh_context(monkeypatch):
    monkeypatch.setattr(cuda, "context_lost", None)


def test_an_error_that_poisons_the_context_says_restart_and_sticks(monkeypatch):
    err = cuda.launch_failure(
        RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered"), "fast", (4, 8)
    )
    assert isinstance(err, explorer.GPUContextLost)
    assert "fast on 4×8" in str(err) and "restart the server" in str(err)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: None)  # as if a GPU were there
    with pytest.raises(explorer.GPUContextLost, match="restart the server"):
        cuda.require_gpu()  # every later GPU call says so too, instead of failing strangely


def test_an_ordinary_launch_error_names_variant_and_shape_and_leaves_the_context():
    err = cuda.launch_failure(RuntimeError("cudaErrorInvalidValue: invalid argument"), "topk_fused", (3, 33))
    assert type(err) is explorer.KernelFailed
    assert "topk_fused on 3×33" in str(err) and cuda.context_lost is None


def test_backend_cuda_without_a_gpu_says_why_and_points_to_the_emulator(monkeypatch):
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "no NVIDIA GPU or driver on this machine")
    with pytest.raises(explorer.GPUUnavailable, match="emulator"):
        explorer.softmax(explorer.make_input("normal", 2, 8), "online_warp", backend="cuda")
