"""Hook launcher for every host: `<venv python> -S zmem_hook.py <Event> --host claude|codex|zcode`.

Python compiles the script it is given on every start (1-3 ms for the launcher's logic) but
imports a module from its cached .pyc, so the work lives in zmem_launch.py beside this file
(the script's directory is first on sys.path)."""

try:
    import zmem_launch

    zmem_launch.main()
except BaseException:  # a broken install must still never fail the host
    import os

    os._exit(0)
