"""The sidebar: every control keyed, initialised once from the URL, mirrored back into the URL."""

from __future__ import annotations

import math

import streamlit as st

import explorer
from explorer import budget, checks
from explorer.errors import shown
from explorer.inputs import MAX_UPLOAD_BYTES

from . import compute
from .common import UPLOAD_MB, backend_badge, block_size_slider, clamp, ensure_choice, sidebar_takes_block
from .menu import PAGES
from .page import EVERY_SECTION, Page
from .state import UPLOAD, Config, UploadedInput, param_key
from .text import as_text
from .url import TABLE, defaults, parse_query, sync_url

ss = st.session_state
WHOLE = {"rows": "Rows", "cols": "Cols", "seed": "Seed"}  # typed whole numbers, checked before they are used


def init_from_url() -> None:
    """Once per session: defaults, overridden by the URL's parameters (a shared link reproduces the view)."""
    if "_init" in ss:
        return
    values, problems = parse_query(st.query_params.to_dict())
    for key, value in {**defaults(), **values}.items():
        if key not in ss:
            ss[key] = value
    ss["_url_problems"] = problems
    ss["_init"] = True


def keep_widget_state() -> None:
    """A widget not drawn in a run loses its state: every URL parameter (page options, other distributions'
    parameters) is written back as a plain session value, so it survives a visit to another page. A timed
    fragment's tick (the Step page's Play) that fires after the user has left its page drops them anyway
    (streamlit#10805), so each is also kept under "_kept" and brought back from there when it has gone."""
    for key, value in ss.get("_kept", {}).items():
        if key not in ss:
            ss[key] = value
    url_keys = [k for k in ss.keys() if isinstance(k, str) and (k in TABLE or k.startswith("p_"))]
    for key in url_keys:
        ss[key] = ss[key]
    ss["_kept"] = {key: ss[key] for key in url_keys}


def _variants_help() -> str:
    return "One or more kernels, run on the same input:\n\n" + "\n\n".join(
        f"**{v.key}** ({v.title}): {v.lesson}" for v in explorer.VARIANTS.values()
    )


def _memory_line(cfg: Config, backend: str) -> tuple[str, str | None]:
    """(caption, refusal or None): a run's and the page's memory (explorer.budget's model) against this server's
    fixed limit for one run (a GPU run's memory against the GPU's free memory)."""
    runs = [  # a variant without a kernel for this dtype or accumulator is refused at once, in words, and holds nothing
        (v, explorer.checks.check_block(v, cfg.block_for(k)))
        for k in cfg.variants
        if (v := explorer.VARIANTS[k]).takes(cfg.dtype, cfg.acc)
    ]
    per_run = max(
        (explorer.bytes_needed(cfg.rows, cfg.cols, cfg.dtype, backend, v, b, False, cfg.acc) for v, b in runs),
        default=0,
    )
    page = budget.page_bytes(runs, cfg.rows, cfg.cols, cfg.dtype, cfg.acc)  # reference, outputs, error reports
    limit = budget.run_budget()
    line = (
        f"A run needs ≈ {checks.size(per_run)} and this page ≈ {checks.size(page)} "
        f"(this server's limit: {checks.size(limit)})."
    )
    refused = {}
    for v, b in runs:
        try:
            explorer.check_fits(cfg.rows, cfg.cols, cfg.dtype, backend, v, b, False, cfg.acc)
        except explorer.TooLarge as exc:  # its words say the limit and what to do
            refused[v.key] = str(exc)
    if refused:
        others = [r for r in runs if r[0].key not in refused]
        return line, _not_run(refused, cfg.variants) + without_the_refused(cfg, backend, list(refused), others)
    if backend != "cuda" and page > limit:
        need, most = checks.sizes(page, limit)
        n = cfg.rows * cfg.cols
        return line, (
            f"Not run: {cfg.rows}×{cfg.cols} = {n:,} elements of {cfg.dtype} with {len(cfg.variants)} variant(s) "
            f"needs about {need} with the float64 reference and error reports kept beside the outputs, over this "
            f"server's limit of {most} for one run (about {n * limit // page:,} elements fit with these "
            "variants). Choose a smaller shape or fewer variants."
        )
    return line, None


def without_the_refused(cfg: Config, backend: str, refused: list[str], fitting: list) -> str:
    """What the variants that fit alone would do without the refused ones: run, or (in the emulation) still be over
    this server's limit with the float64 reference and error reports the page keeps beside their outputs."""
    if not fitting:
        return ""
    names, keys = ", ".join(refused), ", ".join(v.key for v, _ in fitting)
    page, limit = budget.page_bytes(fitting, cfg.rows, cfg.cols, cfg.dtype, cfg.acc), budget.run_budget()
    if backend == "cuda" or page <= limit:
        return f"\n\nThe others fit ({keys}): deselect {names} in the sidebar to run them."
    fewer = " or fewer variants" if len(fitting) > 1 else ""
    return (
        f"\n\nWithout {names}, {keys} would still need about {checks.size(page)} together, with the float64 "
        f"reference and error reports this page keeps, over the limit of {checks.size(limit)}: choose a smaller "
        f"shape{fewer}."
    )


def _not_run(refused: dict[str, str], chosen: tuple[str, ...]) -> str:
    """The refusal of the variants too large to run (reason by variant): a reason every chosen variant shares once,
    for all of them; otherwise each reason, a paragraph each, with the variants it refuses."""
    by_reason: dict[str, list[str]] = {}
    for key, reason in refused.items():
        by_reason.setdefault(reason, []).append(key)
    if len(by_reason) == 1 and len(refused) == len(chosen) > 1:
        return f"Not run (all {len(chosen)} variants): {next(iter(by_reason))}."
    return "\n\n".join(f"Not run ({', '.join(keys)}): {reason}." for reason, keys in by_reason.items())


def _input() -> dict:
    """The Config fields the input section sets: the distribution and its parameters, or the uploaded file."""
    dist_options = TABLE.options("dist")
    ensure_choice("dist", dist_options, TABLE["dist"].default_value())
    st.subheader("Input")
    st.selectbox(
        "Distribution",
        dist_options,
        key="dist",
        format_func=lambda k: "Your own logits (.npy / .csv)" if k == UPLOAD else explorer.DISTRIBUTIONS[k].title,
        help="Each input is chosen to show something:\n\n"
        + "\n\n".join(f"**{d.title}**: {d.shows}" for d in explorer.DISTRIBUTIONS.values()),
    )
    dist = ss["dist"]
    if dist == UPLOAD:
        return {"dist": dist, "params": (), "upload_name": _upload()}
    spec = explorer.DISTRIBUTIONS[dist]
    st.caption(spec.shows)
    values = []
    for name, p in spec.params.items():
        key = param_key(dist, name)
        ss[key] = float(min(max(float(ss.get(key, p.default)), p.low), p.high))
        st.number_input(name, min_value=float(p.low), max_value=float(p.high), key=key, help=p.help, format="%g")
        values.append((name, float(ss[key])))
    return {"dist": dist, "params": tuple(values)}


def _upload() -> str:
    """The uploaded file's name ("" without one); its bytes go to ss["_upload_bytes"], its shape to rows, cols.

    The uploader filters no types and takes a little more than MAX_UPLOAD_BYTES (UPLOAD_MB), so a file of another
    type or just over the limit reaches explorer.load_logits and is refused in its words (what to upload; the size
    and the limit) instead of in Streamlit's ("text/plain files are not allowed", "File must be … or smaller")."""
    file = st.file_uploader(
        f"Logits file (.npy or .csv, at most {MAX_UPLOAD_BYTES / 2**20:.0f} MiB)",
        key="upload",
        max_upload_size=UPLOAD_MB,
        help="A vector (one row) or a rows × cols matrix; parsed as numbers only "
        "(no pickles). It is converted to the dtype chosen below.",
    )
    ss["_upload_bytes"] = None if file is None else file.getvalue()
    if file is None:
        _no_upload()
        return ""
    try:
        x = compute.get_input(UploadedInput(file.name, ss["_upload_bytes"], ss["dtype"]))
    except explorer.ExplorerError as exc:  # every refusal (unreadable, too large): in words, the sidebar goes on
        ss["_upload_problem"] = as_text(exc)  # the page says it too
        st.error(ss["_upload_problem"])
        ss["_upload_bytes"] = None
        _no_upload()
        return file.name
    if (int(ss["rows"]), int(ss["cols"])) != x.shape:  # the shape boxes may be drawn already: set it next run
        ss["_upload_shape"] = (int(x.shape[0]), int(x.shape[1]))
        st.rerun()
    st.caption(f"{as_text(file.name)}: {x.shape[0]} × {x.shape[1]}")
    return file.name


def _no_upload() -> None:
    """No file runs: the shape boxes show the user's own shape again, from next run (they may be drawn already).
    Asked each run, so that a browser's late message with the file's shape in them is undone too."""
    before = ss.get("_shape_before_upload")
    if before and (int(ss["rows"]), int(ss["cols"])) != before[:2]:
        ss["_upload_gone"] = True
        st.rerun()


def whole_number(key: str) -> str | None:
    """Keep ss[key] a whole number in its parameter's range: a typed value outside it (0, −5, 1.5, 3e9) goes back
    to the last good one, and the words why are returned (the box then shows what runs)."""
    low, high = TABLE[key].low, TABLE[key].high
    good = ss.get(f"_{key}_ok", TABLE[key].default_value())
    value = ss.get(key, good)
    try:
        ok = float(value).is_integer() and low <= value <= high
    except (TypeError, ValueError, OverflowError):
        ok = False
    if ok:
        ss[key] = ss[f"_{key}_ok"] = int(value)
        return None
    ss[key] = good
    number = isinstance(value, float) or (isinstance(value, int) and abs(value) < 2**63)  # :g of 10**400 overflows
    whole_value = number and math.isfinite(value) and float(value).is_integer() and abs(value) < 1e21
    typed = f"{int(value):,}" if whole_value else f"{value:.15g}" if number else shown(value)  # not 2.14748e+09
    return f"{WHOLE[key]} {typed} not used: a whole number from {low:,} to {high:,} is needed; still {good:,}."


def _number(column, key: str, **kw) -> None:
    """A whole-number box typed as float, so the browser reads "1e9" as 10⁹ and not as 1; no min or max on the
    widget, so an out-of-range number reaches whole_number and is answered instead of silently kept in the box."""
    problem = whole_number(key)
    ss[key] = float(ss[key])
    column.number_input(WHOLE[key], step=1.0, format="%.0f", key=key, **kw)
    if problem:
        column.warning(problem, icon=":material/edit_off:")


def _shape() -> None:
    c1, c2 = st.columns(2)
    uploaded = ss["dist"] == UPLOAD
    _number(c1, "rows", disabled=uploaded)
    _number(c2, "cols", disabled=uploaded, help="Elements per row: softmax runs along a row.")


def _seed() -> None:
    _number(st, "seed", disabled=ss["dist"] == UPLOAD)


def _dtype() -> None:
    st.selectbox("Input dtype", TABLE.options("dtype"), key="dtype", help="Element type of x and y.")


def _acc() -> None:
    st.selectbox(
        "Accumulator", TABLE.options("acc"), key="acc", help="Type in which the running max m and denominator d live."
    )


def _kernels() -> None:
    st.subheader("Kernels")
    st.multiselect("Variants", TABLE.options("variants"), key="variants", help=_variants_help())
    if sidebar_takes_block():
        block_size_slider("Block size (threads per row, block variants)")


def _row() -> None:
    clamp("row", 0, int(ss["rows"]) - 1, "Row")
    st.number_input("Row to show and trace", min_value=0, max_value=int(ss["rows"]) - 1, step=1, key="row")


SECTIONS = {
    "input": _input,
    "shape": _shape,
    "seed": _seed,
    "dtype": _dtype,
    "accumulator": _acc,
    "kernels": _kernels,
    "row": _row,
}


def sidebar(page: Page) -> Config:
    """The sidebar: the sections `page` reads, then the others in a folded expander that says they do not apply
    here (they keep their values and stay in the URL)."""
    ss["_cfg"] = ss["_fit_problem"] = ss["_upload_problem"] = None  # until this run's sidebar says otherwise
    init_from_url()
    keep_widget_state()
    if page.path != "step":
        ss["_playing"] = False  # Play runs on its page only: leaving it pauses, and coming back does not restart it
    gone = ss.pop("_upload_gone", False)  # no file runs (_no_upload)
    if shape := ss.pop("_upload_shape", None):  # the upload's shape while it runs; the user's comes back after
        ss.setdefault(
            "_shape_before_upload", (ss.get("_rows_ok", ss["rows"]), ss.get("_cols_ok", ss["cols"]), ss["row"])
        )
        ss["rows"], ss["cols"] = ss["_rows_ok"], ss["_cols_ok"] = shape
    elif ss.get("dist") != UPLOAD and (before := ss.pop("_shape_before_upload", None)):
        _user_shape(before)
    elif gone and (before := ss.get("_shape_before_upload")):
        _user_shape(before)  # while no file runs; kept for the next upload
    ss["variants"] = [k for k in ss.get("variants", []) if k in explorer.VARIANTS]
    backend = explorer.resolve_backend("auto")
    uses = page.sections(on_gpu=backend == "cuda")
    runs = "shape" in uses and page.runs_the_shape
    unused = [name for name in SECTIONS if name not in uses]
    with st.sidebar:
        backend_badge()
        for problem in ss.get("_url_problems", []):
            st.warning(as_text(problem), icon=":material/link_off:")  # it quotes the URL's values
        ss["_url_problems"] = []
        drawn = {name: SECTIONS[name]() for name in uses}
        if unused:
            with st.expander("Not used on this page: " + ", ".join(unused), icon=":material/visibility_off:"):
                st.caption(f"They apply to {pages_reading_every_section()}.")
                drawn |= {name: SECTIONS[name]() for name in unused}
        cfg = Config(
            **drawn["input"],
            rows=int(ss["rows"]),
            cols=int(ss["cols"]),
            seed=int(ss["seed"]),
            dtype=ss["dtype"],
            acc=ss["acc"],
            variants=tuple(ss["variants"]),
            block=int(ss.get("block", TABLE["block"].default_value())),
            row=int(ss["row"]),
        )
        line, problem = _memory_line(cfg, backend)
        if runs and problem:
            st.error(problem, icon=":material/block:")
        elif runs:
            st.caption(line)
    ss["_cfg"] = cfg
    ss["_fit_problem"] = problem
    sync_url()
    return cfg


def _user_shape(before: tuple[int, int, int]) -> None:
    """The user's own rows, cols and row, as they were before an upload, back in their boxes."""
    ss["rows"], ss["cols"], ss["row"] = before
    ss["_rows_ok"], ss["_cols_ok"] = before[:2]


def pages_reading_every_section() -> str:
    """'the Outputs, Step through and Error vs float64 pages'."""
    titles = [p.title for p in PAGES if p.sidebar == EVERY_SECTION and p.sidebar_without_gpu is None]
    return "the " + (", ".join(titles[:-1]) + " and " + titles[-1] if len(titles) > 1 else "".join(titles)) + " pages"
