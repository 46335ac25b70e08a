"""The names of the files ZMem keeps in a data dir beside the store, shared by the hook client,
the resident process and doctor. No imports: the launcher loads this before site-packages."""

SOCKET_NAME = "zmem-hookd.sock"  # the resident process listens here
SPAWN_STAMP = "zmem-hookd.starting"  # a client started one; others wait out the grace period
LOG_NAME = "zmem-bg.log"  # one line per hook decision
