"""Hook launcher for every host: `<venv python> -S zmem_hook.py <Event> --host claude|codex|zcode`.

Python compiles the script it is given on every start (1-3 ms for the launcher's logic) but
imports a module from its cached .pyc, so the work lives in zmem_launch.py beside this file.
An install's `<prefix>/bin/zmem-hook` imports this file as a module."""

try:
    import os
    import sys

    # Not left to the interpreter: with PYTHONSAFEPATH=1 (or -P) the script's directory is not
    # on sys.path, and every hook would fail silently.
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    import zmem_launch

    zmem_launch.main()
except BaseException as exc:  # a broken install must still never fail the host
    import os
    import time

    try:  # ...but it must say so where doctor and the user look: the data dir's log
        where = os.path.expanduser(os.environ.get("ZMEM_DATA", "").strip() or "~/.zmem")
        with open(os.path.join(where, "zmem-bg.log"), "a", encoding="utf-8") as log:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.write(f"{stamp} zmem-hook reason=error error=launcher:{type(exc).__name__}\n")
    except BaseException:
        pass
    if isinstance(exc, ImportError):  # a plugin venv without zmem (an install that failed
        try:  # offline): its bootstrap installs again, at most once per 10 minutes
            import subprocess
            import sys

            boot = os.path.join(os.path.dirname(os.path.realpath(__file__)), "bootstrap.py")
            null = subprocess.DEVNULL
            subprocess.Popen([sys.executable, "-S", boot, "--repair"], start_new_session=True,
                             stdin=null, stdout=null, stderr=null)  # fmt: skip
        except BaseException:
            pass
    os._exit(0)
