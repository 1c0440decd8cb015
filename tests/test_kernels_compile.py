"""Every kernel instantiation the explorer can launch compiles, with nvcc to PTX (no GPU needed): a kernel
edit that breaks the build fails here, on CI, not first on the GPU machine."""

import shutil
import subprocess

import pytest

from explorer import bench
from explorer.backends import cuda, cuda_topk
from explorer.registry import VARIANTS
from explorer.topk import VOCABS, topk_launch

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
# fast's instantiations depend on the shape: the benchmark sweeps plus odd and tiny shapes
FAST_SHAPES = (
    [(bench.SWEEP_ELEMENTS // c, c) for c in bench.SWEEP_COLS]
    + list(bench.LONG_ROW_SHAPES)
    + [(1, 1), (3, 33), (1823, 781), (2, 4097)]
)


def launched_names() -> dict[str, set[str]]:
    """Kernel file → the instantiations the backend asks CuPy to compile, for the shapes above."""
    names: dict[str, set[str]] = {}
    for v in VARIANTS.values():
        for dtype in v.dtypes:
            for acc in v.accumulators:
                names.setdefault(v.kernel_file, set()).update(cuda.fixed_kernel_names(v.kernel_file, dtype, acc))
                if v.templated_by_launch:
                    for rows, cols in FAST_SHAPES:
                        names[v.kernel_file].update(cuda.kernel_names(v, v.launch(rows, cols, None, dtype), dtype, acc))
    for dtype in ("float32", "float16", "bfloat16"):
        for k in (1, 8, 33, 64):
            for rows, cols in [(512, c) for c in VOCABS] + [(1, 50257), (3, 1000), (64, 128256), (32, 262144)]:
                for cluster in (False, True):  # a row's chunks merged through global memory, or a cluster
                    launch = topk_launch(rows, cols, k, dtype, cluster=cluster)
                    for softmax in (0, 1):  # fused, and the selection of the unfused pipeline
                        names.setdefault("topk.cu", set()).add(cuda_topk.topk_kernel_name(launch, dtype, bool(softmax)))
    return names


NAMES = launched_names()


@pytest.mark.parametrize("filename", sorted(NAMES))
def test_every_launched_instantiation_compiles(filename, tmp_path):
    names = sorted(NAMES[filename])
    # taking each specialisation's address instantiates it, without spelling out its parameters
    source = (
        cuda.kernel_source(filename)
        + "\nvoid instantiate_all() {\n"
        + "".join(f"    (void)&{n};\n" for n in names)
        + "}\n"
    )
    (tmp_path / filename).write_text(source)
    ptx = tmp_path / "out.ptx"
    result = subprocess.run(
        # -Xcicc -O0: the front end and PTX code generation check what a kernel edit can break; NVVM's optimiser
        # (four times the compile time) adds no check
        [NVCC, "-std=c++17", "-arch=sm_90", "-ptx", "-Xcicc", "-O0", "-o", str(ptx), str(tmp_path / filename)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert ptx.read_text().count(".entry ") == len(names)


def test_the_stamped_topk_build_compiles(tmp_path):
    """scripts/timeline_topk.py's build: topk.cu with TOPK_STAMP recording (empty in every other build)."""
    from scripts.timeline_topk import STAMPS

    name = cuda_topk.topk_kernel_name(topk_launch(1, 50257, 50, "float32"), "float32", True)
    assert "globaltimer" in _stamped_ptx(tmp_path, STAMPS, "topk.cu", [name])


def test_the_stamped_fast_build_compiles(tmp_path):
    """scripts/timeline_fast.py's build: fast.cu with FAST_STAMP recording (empty in every other build), in a
    fast_row launch whose slices exchange through global memory, a row over several clusters and a fast_stream
    launch."""
    from scripts.profile_fast import parse_case
    from scripts.timeline_fast import STAMPS

    names = [
        cuda.kernel_names(VARIANTS["fast"], parse_case(case)[3], dtype, "float32")[0]
        for case, dtype in (
            ("float32:12x300000", "float32"),
            ("float32:1x1048576", "float32"),
            ("bfloat16:1x16777216", "bfloat16"),
        )
    ]
    assert [name.split("<")[0] for name in names] == ["fast_row", "fast_row_cluster", "fast_stream"]
    text = _stamped_ptx(tmp_path, STAMPS, "fast.cu", names)
    assert text.count(".entry ") == 3 and "globaltimer" in text


def _stamped_ptx(tmp_path, stamps: str, filename: str, names: list[str]) -> str:
    """The PTX of kernels/<filename> built with a timeline script's stamps, instantiating `names`."""
    instantiate = "".join(f" (void)&{n};" for n in names)
    source = stamps + cuda.kernel_source(filename) + f"\nvoid instantiate() {{{instantiate} }}\n"
    (tmp_path / "stamped.cu").write_text(source)
    ptx = tmp_path / "out.ptx"
    result = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "-ptx", "-Xcicc", "-O0", "-o", str(ptx), str(tmp_path / "stamped.cu")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return ptx.read_text()
