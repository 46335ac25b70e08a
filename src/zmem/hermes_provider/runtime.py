"""Where a Hermes session's memory lives: the settings (ZMEM_STORE/ZMEM_DATA when set, else
<hermes_home>/zmem, so each Hermes profile keeps its own store), the session's namespace (the
checkout Hermes works in, else user:global), and the table of sessions a ZMem provider serves,
which the post_tool_call and pre_llm_call hooks read: Hermes loads that plugin as a separate
module, so what the two share lives here, in the installed package."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zmem import config
from zmem.capture import project_namespace
from zmem.config import Settings
from zmem.hosts.events import HookEvent
from zmem.hosts.verbs import Hooks
from zmem.models import GLOBAL_NAMESPACE

DATA_SUBDIR = "zmem"


def hermes_home() -> Path:
    """The Hermes home when initialize did not name one (discovery's is_available): Hermes's
    own resolution when it is importable (it honours a per-task profile override), else
    $HERMES_HOME, else ~/.hermes."""
    try:
        from hermes_constants import get_hermes_home
    except ImportError:
        raw = os.environ.get("HERMES_HOME", "").strip()
        return Path(raw).expanduser() if raw else Path.home() / ".hermes"
    return Path(get_hermes_home())


def settings_for(home: str | Path | None) -> Settings:
    """ZMem's settings inside Hermes. An explicit ZMEM_STORE or ZMEM_DATA wins (one store
    shared with the coding hosts); otherwise the data dir is <hermes_home>/zmem."""
    env = dict(os.environ)
    if not env.get("ZMEM_STORE", "").strip() and not env.get("ZMEM_DATA", "").strip():
        base = Path(home).expanduser() if home else hermes_home()
        env["ZMEM_DATA"] = str(base / DATA_SUBDIR)
    return config.load_settings(env)


def working_dir(agent_workspace: object) -> str | None:
    """The directory the session works in. Hermes 0.19.0 passes agent_workspace as a name
    ("hermes"), not a path; a path is honoured if a later release sends one. Otherwise the
    terminal tool's directory (TERMINAL_CWD, which Hermes exports), else the process's; None
    when even that is gone (a deleted directory must not cost the session its memory)."""
    if isinstance(agent_workspace, str) and os.path.isabs(agent_workspace):
        if os.path.isdir(agent_workspace):
            return agent_workspace
    cwd = os.environ.get("TERMINAL_CWD", "").strip()
    if cwd and os.path.isdir(cwd):
        return cwd
    try:
        return os.getcwd()
    except OSError:
        return None


def in_checkout(directory: str | None) -> bool:
    if not directory:
        return False
    try:
        root, _ = project_namespace.find_checkout(directory)
        return (root / ".git").exists()
    except OSError:
        return False


def session_namespace(hooks: Hooks, directory: str | None, *, may_write: bool) -> str:
    """project:<repo> for a session inside a checkout, derived as the hooks derive it (the
    remote, else the checkout's name; ZMEM_NS_MIGRATION_MAP aliases recorded when this session
    may write). Outside one, user:global: Hermes is also a general assistant, and a home
    directory is not a project."""
    if directory is None or not in_checkout(directory):
        return GLOBAL_NAMESPACE
    if may_write:
        return hooks.namespace(HookEvent(host="hermes", name="SessionStart", cwd=directory))
    return project_namespace.derive(directory)


# ---- the sessions a provider serves, for the zmem_hooks plugin --------------------------


@dataclass(frozen=True)
class Route:
    data_dir: Path
    query_context: bool  # ZMEM_QUERY_CONTEXT: off stops ring collection too (spec)
    may_write: bool
    # The provider's pre_llm_call delivery for this session: the hazards its tool calls
    # touched since the last one, as context text ("" for none).
    deliver: Callable[[str], str] | None = None


_routes: dict[str, Route] = {}
_fed: set[str] = set()  # sessions whose ring post_tool_call fed this process
_lock = threading.Lock()


def bind(session_id: str, route: Route) -> None:
    if session_id:
        with _lock:
            _routes[session_id] = route


def unbind(session_id: str) -> None:
    with _lock:
        _routes.pop(session_id, None)
        _fed.discard(session_id)


def route(session_id: str) -> Route | None:
    with _lock:
        return _routes.get(session_id)


def mark_fed(session_id: str) -> None:
    with _lock:
        _fed.add(session_id)


def fed(session_id: str) -> bool:
    with _lock:
        return session_id in _fed
