"""Benchmark results files, for the Timing page and the top-k page's timing: loading (checked by
explorer.bench.load, labelled by GPU, the same file once), the bundled H200 files behind one button, the
stamps, and how every timing table shows the measurements.

Text from results files reaches plotly only through plotly_text(), and Streamlit's Markdown (messages, labels)
only through ui.text.as_text(): it shows as text, never as markup.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
from pathlib import Path

import pandas as pd
import streamlit as st

import explorer
from explorer import bench
from explorer.inputs import MAX_UPLOAD_BYTES, sizes

from . import figures
from .common import UPLOAD_MB, number_columns
from .figures import plotly_text
from .figures.common import device_line
from .text import as_text

RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "results"  # the bundled H200 results
TIMES_CAPTION = (
    "Two times per row. **Event** (median µs): CUDA events around each launch, what a Python loop sees, "
    "launch gaps included. **Device** (device µs): the kernels' own durations as the GPU recorded them (CUPTI, "
    "NVIDIA's profiling interface, through torch.profiler; only where torch was installed), summed per call, median "
    "over batches. p10–p90: the 10th to 90th percentile of the repeats, the spread the error bars draw. "
    "On small problems a kernel lasts a few µs and issuing it from Python longer, so the two differ; "
    "on large ones they agree within a few percent."
)
TIMES = ("device", "event")  # what a page's bars can show (figures.TIME_FIELDS), the default first
ss = st.session_state


@st.cache_data(show_spinner=False, max_entries=16)
def load_results(data: bytes) -> dict:
    return bench.load(data)


VERSION_PX = 110  # a peer's version in full: torch's carries its CUDA build, "2.11.0+cu130"
# How every timing table (this page's and the top-k page's) shows the measurements.
TIME_COLUMNS = number_columns(
    {
        "median_us": ("median µs", "%.2f"),
        "p10_us": ("p10 µs", "%.2f"),
        "p90_us": ("p90 µs", "%.2f"),
        "gbps": ("GB/s (event)", "%.0f"),
        "device_us": ("device µs", "%.2f"),
        "device_p10_us": ("device p10 µs", "%.2f"),
        "device_p90_us": ("device p90 µs", "%.2f"),
        "gbps_device": ("GB/s (device)", "%.0f"),
        "bytes_moved": ("bytes moved", "%d"),
        "max_rel": ("max rel", "%.1e"),
    }
) | {"version": st.column_config.TextColumn("version", width=VERSION_PX), "error": st.column_config.TextColumn("error")}


def display_names(df: pd.DataFrame, ticks: bool = False) -> pd.DataFrame:
    """A copy for the figures: names carry the peer's version, and every file string is escaped for plotly; the name
    as measured stays in `kernel` (what a figure keys a kernel's colour on). ticks: the version on a line of its own
    and without its local part (torch's "+cu130"; the table has it), so that a bar chart's names stay narrow enough
    to stand level."""

    def named(name, version) -> str:
        if not (isinstance(version, str) and version):
            return plotly_text(name)
        return plotly_text(name) + (
            "<br>" + plotly_text(version.split("+")[0]) if ticks else plotly_text(" " + version)
        )

    out = df.copy()
    out["kernel"] = out["name"]
    versions = out["version"] if "version" in out.columns else [None] * len(out)
    out["name"] = [named(n, v) for n, v in zip(out["name"], versions)]
    for c in ("source", "kind"):
        out[c] = [plotly_text(v) for v in out[c]]
    return out


def failed(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of peers or variants that could not run on the shape, or ran wrong (an error, no times)."""
    if "error" not in df.columns:
        return df.iloc[0:0]
    return df[df["error"].notna() & (df["error"].astype(str) != "")]


def result_sources(
    label: str, key: str, help: str, run: dict | None, download_name: str, bundled_key: str, topk: bool
) -> tuple[dict, dict]:
    """A page's results: an uploader of results files (widget key f"{key}_files"), the bundled ones behind
    bundled_button(bundled_key, topk), and this session's run (offered as a JSON download), each labelled by its
    GPU, and by where it came from too where several share a GPU: {label: document}, {label: where it came from}. A
    file that is not a results file is refused in words; results already loaded (the same file twice) are shown once."""
    # the uploads as this run sees them (the widget's value, read before it is drawn): the expander names them
    uploads = [(f.name, *_read_upload(f.getvalue())) for f in ss.get(f"{key}_files") or []]
    loaded = ["this run"] * bool(run) + [name for name, doc, _ in uploads if doc is not None]
    loaded += list(bundled_results(topk)) if ss.get(bundled_key) else []
    # the uploader and the bundled files' button in an expander that names what is loaded: open while nothing is,
    # closed once something is (a new label is a new expander), so that the results are on the first screen
    with st.expander(_files_label(label, loaded), expanded=not loaded):
        # no type filter and a little more than the limit, as the sidebar's uploader: a file of another type or over
        # the limit is refused below in our words, not by Streamlit ("... files are not allowed", "File must be ...")
        st.file_uploader(
            label,
            accept_multiple_files=True,
            key=f"{key}_files",
            max_upload_size=UPLOAD_MB,
            label_visibility="collapsed",  # the expander's label says it, and the caption under it the help
        )
        st.caption(help)
        bundled = bundled_button(bundled_key, topk)
    found, seen = [], {}

    def add(doc: dict, origin: str) -> None:
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
        if digest in seen:
            st.caption(f"{as_text(origin)} holds the same results as {as_text(seen[digest])}: shown once.")
            return
        seen[digest] = origin
        found.append((doc, origin))

    if run:
        add(run, "this run")
        st.download_button(
            "Download this run's results (JSON)",
            json.dumps(run, indent=1),
            file_name=f"{download_name}_{datetime.date.today().isoformat()}.json",
            mime="application/json",
            key=f"json_{key}",
            on_click="ignore",
            icon=":material/download:",
        )
    for name, data in bundled.items():
        add(load_results(data), name)
    for name, doc, problem in uploads:
        if doc is None:
            st.error(as_text(f"{name}: {problem}"))  # the name and the values it quotes come from the file
        else:
            add(doc, name)
    return labelled(found)


FILES_NAMED = 3  # the loaded files the expander's label names, at most


def _read_upload(data: bytes) -> tuple[dict | None, str | None]:
    """An uploaded results file: (its document, None), or (None, why it is refused)."""
    try:
        if len(data) > MAX_UPLOAD_BYTES:
            shown, limit = sizes(len(data), MAX_UPLOAD_BYTES)
            raise explorer.InvalidInput(f"it is {shown}; the limit is {limit}: upload a smaller results file")
        return load_results(data), None
    except explorer.ExplorerError as exc:
        return None, str(exc)


def _files_label(label: str, names: list[str]) -> str:
    """The files expander's label: what it holds, and what is loaded ("…: a.json, b.json +2 loaded")."""
    if not names:
        return label
    more = f" +{len(names) - FILES_NAMED}" if len(names) > FILES_NAMED else ""
    return as_text(f"{label}: {', '.join(names[:FILES_NAMED])}{more} loaded")


def labelled(found: list[tuple[dict, str]]) -> tuple[dict, dict]:
    """Results documents and where each came from, labelled by GPU: {label: document}, {label: where it came from}.
    Where several share a GPU, each label names where it came from too ("NVIDIA H200 (sweep-fast.json)"), so no
    file goes by the GPU's name alone beside another of the same GPU."""
    gpus = [str(doc.get("meta", {}).get("gpu") or origin) for doc, origin in found]
    sources, origins = {}, {}
    for (doc, origin), gpu in zip(found, gpus):
        label = first = gpu if gpus.count(gpu) == 1 else f"{gpu} ({origin})"
        for n in itertools.count(2):  # two uploads of one name: the second is "... #2"
            if label not in sources:
                break
            label = f"{first} #{n}"
        sources[label], origins[label] = doc, origin
    return sources, origins


@st.cache_data(show_spinner=False)
def bundled_results(topk: bool) -> dict[str, bytes]:
    """The results files shipped in docs/results, by name: those with top-k rows (topk) or the others."""
    out = {}
    for path in sorted(RESULTS_DIR.glob("*.json")):
        data = path.read_bytes()
        try:
            doc = load_results(data)
        except explorer.ExplorerError:
            continue
        if any(r.get("k") is not None for r in doc["results"]) == topk:
            out[path.name] = data
    return out


def _flip(key: str) -> None:
    ss[key] = not ss.get(key)


def bundled_button(key: str, topk: bool) -> dict[str, bytes]:
    """One button that loads the bundled results (and then removes them); the files while they are loaded.
    key is the page's URL parameter for it, so a shared link shows them too."""
    files = bundled_results(topk)
    if not files:
        return {}
    gpus = as_text(", ".join(sorted({str(load_results(d).get("meta", {}).get("gpu") or "?") for d in files.values()})))
    label = (
        f"Remove the bundled {gpus} results"
        if ss.get(key)
        else f"Load the bundled {gpus} results ({len(files)} file{'s' * (len(files) > 1)} from docs/results)"
    )
    st.button(
        label,
        key=f"{key}_button",
        on_click=_flip,
        args=(key,),
        icon=":material/folder_open:",
        help=as_text(", ".join(files)),
    )
    return files if ss.get(key) else {}


def time_shown(timed: pd.DataFrame, key: str) -> str:
    """The time a page's bars show, chosen with the radio `key` (a URL parameter, choices TIMES): device time (CUPTI,
    the kernels alone) or event time (what a Python loop sees), device where every timed row has it; event time, and
    why, where one does not."""
    device = "device_us" in timed and pd.to_numeric(timed["device_us"], errors="coerce").notna().all()
    st.radio(
        "Time shown",
        TIMES,
        key=key,
        horizontal=True,
        disabled=not device,
        format_func={"device": "device (CUPTI: the kernels alone)", "event": "event (CUDA events: per launch)"}.get,
        help="Device time: the kernels' own durations from CUPTI records. Event time: CUDA events around each launch, "
        "launch gaps included. They agree on large problems; on small ones (a few µs) event time is mostly launch.",
    )
    if not device:
        st.caption(
            "Device time is not in every result of this shape (a file measured without torch): event time shown."
        )
        return "event"
    return ss[key]


def share_stamp(part: pd.DataFrame, sources: dict[str, dict], origins: dict[str, str]) -> list[str]:
    """The share image's stamp for results rows of one shape: the shape, dtype, k (top-k rows) and accumulator,
    then one line per results file they come from."""
    r = part.iloc[0]
    k = f" · top-{int(r['k'])}" if pd.notna(r.get("k")) else ""
    shape = f"shape {int(r['rows'])}×{int(r['cols'])} · dtype {r['dtype']}{k} · accumulator {r.get('acc') or '?'}"
    return [shape] + [device_line(sources[s].get("meta", {}), source=origins[s]) for s in dict.fromkeys(part["source"])]


def meta_stamp(meta: dict) -> str:
    return plotly_text(figures.stamp_text({"backend": "cuda", **meta}, str(meta.get("date", "?"))[:10]))


def chart_stamp(part: pd.DataFrame, sources: dict[str, dict]) -> str:
    """The charts' stamp for results rows: each file's GPU, CUDA, CuPy and date, one line each (once)."""
    return "<br>".join(dict.fromkeys(meta_stamp(sources[s].get("meta", {})) for s in part["source"]))


def no_gpu_note(slot, loaded: bool, files: str) -> None:
    """What a timing section says in `slot` where this server has no GPU: how to see timings (load `files`), or, once
    files are loaded, that theirs were measured elsewhere (the CPU badge above them would otherwise seem to
    contradict them)."""
    if loaded:
        slot.caption("This server has no GPU: the timings below were measured on the GPUs their files name.")
    else:
        slot.info(
            "Timings need a GPU: this server runs the CPU emulation, whose speed says nothing about the kernels. "
            f"Load {files} to see and compare them.",
            icon=":material/timer_off:",
        )
