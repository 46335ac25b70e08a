"""`python -m zmem` runs the CLI."""

from zmem.cli import main

if __name__ == "__main__":
    main()
