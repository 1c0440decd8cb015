"""Print the README's variant table from the registry (tests/test_docs.py checks the README holds it).

python scripts/variant_table.py
"""

import explorer


def variant_table() -> str:
    lines = [
        "| variant | kernel | per row | seed | reads / writes per element | dtypes · accumulators | teaches |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in explorer.VARIANTS.values():
        accs = "fp32 only" if v.accumulators == ("float32",) else "fp32, fp16, bf16"
        functions = ", ".join(f"`{f}`" for f in v.functions)
        lines.append(
            f"| `{v.key}` | {functions} in kernels/{v.kernel_file} | {v.family} | {v.seed} | "
            f"{v.reads_per_element} / {v.writes_per_element} | fp32, fp16, bf16 · {accs} | {v.lesson} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(variant_table())
