"""The __global__ parser (explorer/cuda_source.py) and the Kernels page's excerpt built on it: a variant's
excerpt holds exactly the kernels the registry says it launches."""

import pytest

import explorer
from explorer.cuda_source import global_functions
from ui.pages.kernels import kernel_excerpt

SOURCE = """\
#include <cuda_fp16.h>
__host__ __device__ constexpr int threads(int hold, int held) { return hold * (held > 4 ? 2 : 1); }

// first: launch bounds nested three deep, a comment on two lines
// (a "{" here is not a brace)
template <typename T, int HOLD, int N = (HOLD > 2 ? 4 : 8)>
__global__ void __launch_bounds__(threads(HOLD, max(N, int(sizeof(T)))), 2) first(const T* x, int cols) {
    if (cols > 0) { printf("}"); }
}

__global__ void declared(float* y);  // a declaration, not a definition
template <typename T, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(threads(CLUSTER, (int)sizeof(T)))
second_kernel(T* y,
              int rows) {
    y[0] = rows;
}
__device__ int helper(int a) { return a; }
"""


def test_the_parser_finds_names_and_whole_definitions_whatever_the_nesting():
    first, second = global_functions(SOURCE)
    assert (first.name, second.name) == ("first", "second_kernel")
    assert first.text.startswith("// first: launch bounds") and first.text.endswith('printf("}"); }\n}')
    assert "template <typename T, int HOLD, int N = (HOLD > 2 ? 4 : 8)>\n__global__" in first.text
    assert second.text.startswith("template <typename T, int CLUSTER>\n__global__ void __cluster_dims__")
    assert second.text.endswith("y[0] = rows;\n}")
    assert "helper" not in first.text + second.text and "declared" not in first.text + second.text


def test_the_parser_refuses_an_unbalanced_source():
    with pytest.raises(ValueError, match="unbalanced"):
        global_functions("__global__ void broken(int n) { if (n) {")


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_a_variants_excerpt_holds_exactly_the_kernels_it_launches(key):
    v = explorer.VARIANTS[key]
    source = explorer.kernel_source(key)
    excerpt = kernel_excerpt(source, v.functions)
    assert excerpt is not None
    definitions = {function.name: function.text for function in global_functions(source)}
    for name in v.functions:
        assert definitions[name] in excerpt, (key, name)
    others = [text for name, text in definitions.items() if name not in v.functions]
    assert not [text for text in others if text in excerpt], key
    assert excerpt.count("__global__") == len(v.functions), key


def test_fast_shows_its_row_kernels_and_not_the_split_kernels():
    """fast_row and fast_row_cluster nest parentheses in __launch_bounds__; fast_split_* share fast's prefix."""
    names = [function.name for function in global_functions(explorer.kernel_source("fast"))]
    excerpt = kernel_excerpt(explorer.kernel_source("fast"), explorer.VARIANTS["fast"].functions)
    assert {"fast_row", "fast_row_cluster", "fast_split_partial", "fast_split_finish"} <= set(names)
    assert ") fast_row(" in excerpt and "\nfast_row_cluster(" in excerpt
    assert "fast_split_partial(" not in excerpt and "fast_split_finish(" not in excerpt
