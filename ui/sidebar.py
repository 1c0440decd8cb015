"""The sidebar: every control keyed, initialised once from the URL, mirrored back into the URL."""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.inputs import MAX_UPLOAD_BYTES

from . import compute
from .common import backend_badge
from .state import (
    BLOCK_SIZES,
    DTYPE_NAMES,
    MAX_DIM,
    PAGE_KEYS,
    PREC_CAP_GPU,
    UPLOAD,
    Config,
    defaults,
    param_key,
    parse_query,
    to_query,
)

ss = st.session_state


def init_from_url() -> None:
    """Once per session: defaults, overridden by the URL's parameters (a shared link reproduces the view)."""
    if "_init" in ss:
        return
    values, problems = parse_query(st.query_params.to_dict())
    if "prec_cap" not in values and explorer.resolve_backend("auto") == "cuda":
        values["prec_cap"] = PREC_CAP_GPU  # the precision lab goes further by default where the GPU replays
    for key, value in {**defaults(), **values}.items():
        if key not in ss:
            ss[key] = value
    ss["_url_problems"] = problems
    ss["_init"] = True


def keep_state() -> None:
    """Widgets not drawn in a run lose their state; page options and other distributions' params must not."""
    for key in list(ss.keys()):
        if isinstance(key, str) and (key in PAGE_KEYS or key.startswith("p_") or key == "block"):
            ss[key] = ss[key]


def _clamp_int(key: str, low: int, high: int) -> None:
    try:
        value = int(ss.get(key, low))
    except (TypeError, ValueError):
        value = low
    ss[key] = min(max(value, low), high)


def _variants_help() -> str:
    return "One or more kernels, run on the same input:\n\n" + "\n\n".join(
        f"**{v.key}** ({v.title}): {v.lesson}" for v in explorer.VARIANTS.values())


def _memory_line(cfg: Config, backend: str) -> tuple[str, str | None]:
    """(caption, refusal or None): what a run needs against what the backend has free."""
    itemsize = explorer.DTYPES[cfg.dtype].itemsize
    per_run = max((explorer.bytes_needed(cfg.rows, cfg.cols, cfg.dtype, backend, explorer.VARIANTS[k],
                                         cfg.block_for(k) or 0, False) for k in cfg.variants), default=0)
    kept = cfg.rows * cfg.cols * (8 + itemsize * (1 + len(cfg.variants)))  # reference, input, outputs
    free_fn = getattr(getattr(explorer, "api", None), "free_bytes", None)
    try:
        free = free_fn(backend) if free_fn else None
    except explorer.ExplorerError:
        free = None
    where = "GPU memory" if backend == "cuda" else "host memory"
    line = f"A run needs ≈ {per_run / 2**20:,.1f} MiB, and the app keeps ≈ {kept / 2**20:,.1f} MiB"
    line += f" ({where}: {free / 2**30:,.1f} GiB free)." if free and free < 2**62 else "."
    try:
        for k in cfg.variants:
            explorer.check_fits(cfg.rows, cfg.cols, cfg.dtype, backend, explorer.VARIANTS[k], cfg.block_for(k) or 0)
    except explorer.TooLarge as exc:
        return line, f"Not run: {exc}. Make rows or cols smaller."
    if free and free < 2**62 and backend != "cuda" and per_run + kept > free:
        return line, (f"Not run: {cfg.rows}×{cfg.cols} {cfg.dtype} with {len(cfg.variants)} variant(s) needs about "
                      f"{(per_run + kept) / 2**30:.2f} GiB but only {free / 2**30:.2f} GiB of host memory is free. "
                      "Make rows or cols smaller, or select fewer variants.")
    return line, None


def sidebar() -> Config:
    init_from_url()
    keep_state()
    side = st.sidebar
    with side:
        backend_badge()
        for problem in ss.get("_url_problems", []):
            st.warning(problem, icon=":material/link_off:")
        ss["_url_problems"] = []

        st.subheader("Input")
        dist_options = [*explorer.DISTRIBUTIONS, UPLOAD]
        if ss.get("dist") not in dist_options:
            ss["dist"] = defaults()["dist"]
        st.selectbox("Distribution", dist_options, key="dist",
                     format_func=lambda k: "Your own logits (.npy / .csv)" if k == UPLOAD else explorer.DISTRIBUTIONS[k].title,
                     help="Each input is chosen to show something:\n\n" + "\n\n".join(
                         f"**{d.title}**: {d.shows}" for d in explorer.DISTRIBUTIONS.values()))
        dist = ss["dist"]
        params: tuple = ()
        upload_name = ""
        if dist == UPLOAD:
            limit = MAX_UPLOAD_BYTES / 2**20
            file = st.file_uploader(f"Logits file (.npy or .csv, at most {limit:.0f} MiB)", type=["npy", "csv"],
                                    key="upload", max_upload_size=int(limit),
                                    help="A vector (one row) or a rows × cols matrix; parsed as numbers only "
                                         "(no pickles). It is converted to the dtype chosen below.")
            if file is not None:
                upload_name = file.name
                ss["_upload_bytes"] = file.getvalue()
            else:
                ss["_upload_bytes"] = None
        else:
            spec = explorer.DISTRIBUTIONS[dist]
            st.caption(spec.shows)
            values = []
            for name, p in spec.params.items():
                key = param_key(dist, name)
                if key not in ss:
                    ss[key] = float(p.default)
                ss[key] = float(min(max(float(ss[key]), p.low), p.high))
                st.number_input(name, min_value=float(p.low), max_value=float(p.high), key=key, help=p.help,
                                format="%g")
                values.append((name, float(ss[key])))
            params = tuple(values)

        if dist == UPLOAD and ss.get("_upload_bytes") is not None:
            try:
                x = compute.get_input(("upload", upload_name, ss["_upload_bytes"], ss["dtype"]))
                ss["rows"], ss["cols"] = int(x.shape[0]), int(x.shape[1])
                st.caption(f"{upload_name}: {x.shape[0]} × {x.shape[1]}")
            except explorer.InvalidInput as exc:
                st.error(str(exc))
                ss["_upload_bytes"] = None
        c1, c2 = st.columns(2)
        _clamp_int("rows", 1, MAX_DIM)
        _clamp_int("cols", 1, MAX_DIM)
        c1.number_input("Rows", min_value=1, max_value=MAX_DIM, step=1, key="rows", disabled=dist == UPLOAD)
        c2.number_input("Cols", min_value=1, max_value=MAX_DIM, step=1, key="cols", disabled=dist == UPLOAD,
                        help="Elements per row: softmax runs along a row.")
        _clamp_int("seed", 0, 2**32 - 1)
        st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key="seed", disabled=dist == UPLOAD)

        st.subheader("Numbers")
        c1, c2 = st.columns(2)
        c1.selectbox("Input dtype", DTYPE_NAMES, key="dtype", help="Element type of x and y.")
        c2.selectbox("Accumulator", DTYPE_NAMES, key="acc", help="Type in which the running max m and denominator d live.")

        st.subheader("Kernels")
        ss["variants"] = [k for k in ss.get("variants", []) if k in explorer.VARIANTS]
        st.multiselect("Variants", list(explorer.VARIANTS), key="variants", help=_variants_help())
        variants = tuple(ss["variants"])
        if any(explorer.VARIANTS[k].takes_block_size for k in variants):
            if ss.get("block") not in BLOCK_SIZES:
                ss["block"] = defaults()["block"]
            st.select_slider("Block size (threads per row, block variants)", BLOCK_SIZES, key="block")
        _clamp_int("row", 0, int(ss["rows"]) - 1)
        st.number_input("Row to show and trace", min_value=0, max_value=int(ss["rows"]) - 1, step=1, key="row")

        cfg = Config(dist=dist, params=params, rows=int(ss["rows"]), cols=int(ss["cols"]), seed=int(ss["seed"]),
                     dtype=ss["dtype"], acc=ss["acc"], variants=variants, block=int(ss.get("block", defaults()["block"])),
                     row=int(ss["row"]), upload_name=upload_name)
        backend = explorer.resolve_backend("auto")
        line, problem = _memory_line(cfg, backend)
        if problem:
            st.error(problem, icon=":material/block:")
        else:
            st.caption(line)
    ss["_cfg"] = cfg
    ss["_fit_problem"] = problem
    sync_url()
    return cfg


def sync_url() -> None:
    wanted = to_query({k: ss[k] for k in ss.keys() if isinstance(k, str) and not k.startswith("_")})
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)
