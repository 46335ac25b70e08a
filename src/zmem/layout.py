"""The names of the files ZMem keeps in a data dir beside the store, shared by the hook client,
the resident process and doctor, and how private they are. No imports at module level: the
launcher loads this before site-packages."""

SOCKET_NAME = "zmem-hookd.sock"  # the resident process listens here
SPAWN_STAMP = "zmem-hookd.starting"  # a client started one; others wait out the grace period
LOG_NAME = "zmem-bg.log"  # one line per hook decision
HTTP_CONFIG = "hookd-http.json"  # Claude Code's http prompt hook: port and secret (setup claude)
MCP_TOKEN = "mcp-http-token"  # `zmem mcp --http`'s own bearer token when none is configured
KEEPER_PID = "zmem-hookd-keeper.pid"  # the process holding that port (resident.keeper)
# Per-session cooldown sentinels: .<kind>-prompted-<session>, pruned by `zmem sweep`.
SENTINEL_KINDS = ("capture", "convention")
SENTINEL_SUFFIX = "-prompted-"

# Memories can hold secrets (manual capture mode stores them verbatim): nothing ZMem writes is
# for other local users. Directories 0700, files 0600.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def keep_private() -> None:
    """For ZMem's own processes (the CLI, the hook client, the resident process): every file
    and directory they create, SQLite's WAL and the logs included, is private whatever the
    user's umask (which is only ever tightened, never loosened)."""
    import os

    os.umask(os.umask(0o077) | 0o077)
