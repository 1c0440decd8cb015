"""Registers per thread of kernel instantiations as CuPy builds them (NVRTC, then ptxas), without a GPU.

CuPy's NVRTC and nvcc can allocate registers differently (fast_row gets 48 from one and 32 from the
other), and occupancy follows the count the GPU runs. Needs CuPy's NVRTC (requirements-gpu.txt) and
ptxas (the CUDA toolkit); the counts match `cuda.resources` on the H200 for the kernels checked.

    PYTHONPATH=. python scripts/kernel_registers.py fast.cu "fast_row<float, float, 4, 8, 2, 0>" ...
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from cupy_backends.cuda.libs import nvrtc

from explorer.backends.cuda import kernel_source

CUDA_INCLUDE = [f"-I{p}" for p in ("/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include")]


def registers(filename: str, names: list[str], arch: str = "90") -> dict[str, int]:
    """Instantiation -> registers per thread, compiled as cuda.py compiles it (-std=c++17)."""
    program = nvrtc.createProgram(kernel_source(filename), filename, [], [])
    for name in names:
        nvrtc.addNameExpression(program, name)
    try:
        nvrtc.compileProgram(program, ["-std=c++17", f"-arch=compute_{arch}", *CUDA_INCLUDE])
    except nvrtc.NVRTCError:
        sys.exit(nvrtc.getProgramLog(program))
    lowered = {nvrtc.getLoweredName(program, name): name for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "kernels.ptx"
        ptx.write_bytes(nvrtc.getPTX(program))
        log = subprocess.run(
            ["ptxas", f"-arch=sm_{arch}", "-v", str(ptx), "-o", str(Path(tmp) / "kernels.cubin")],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    found = re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", log, re.S)
    return {lowered[symbol]: int(count) for symbol, count in found if symbol in lowered}


if __name__ == "__main__":
    for name, count in registers(sys.argv[1], sys.argv[2:]).items():
        print(f"{count:4d}  {name}")
