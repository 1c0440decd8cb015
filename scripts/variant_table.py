"""Print the README's variant table from the registry (tests/test_docs.py checks the README holds it).

python scripts/variant_table.py
"""

import explorer
from explorer.numerics import SHORT_NAMES


def _names(dtypes: tuple[str, ...]) -> str:
    """The registry's dtype names, short ("fp32, fp16"); a single one reads "fp32 only"."""
    short = ", ".join(SHORT_NAMES.get(d, d) for d in dtypes)
    return f"{short} only" if len(dtypes) == 1 else short


def variant_table() -> str:
    lines = [
        "| variant | kernel | per row | origin | reads / writes per element | dtypes · accumulators | teaches |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in explorer.VARIANTS.values():
        functions = ", ".join(f"`{f}`" for f in v.functions)
        lines.append(
            f"| `{v.key}` | {functions} in kernels/{v.kernel_file} | {v.family} | {v.origin} | "
            f"{v.reads_per_element} / {v.writes_per_element} | {_names(v.dtypes)} · {_names(v.accumulators)} | {v.lesson} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(variant_table())
