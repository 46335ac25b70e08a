"""The conversational dev protocol (issue 35): LoCoMo read as the prompt hook reads it, under a
grid of reading variants, with leave-one-conversation-out selection and the check that a
change's effect on the tune conversations predicts its effect on the held-out one. The data
(CC BY-NC) is read from --input at run time and never copied here.

    .venv/bin/python scripts/dev_protocol.py --input ../shared/data/locomo/locomo-dev.json \\
        --json-out /tmp/dev-protocol.json [--profile minilm] [--variants hooks,bench,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zmem.cli import output
from zmem.evaluation import dev_protocol, locomo


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line on stderr, exit 2, nothing written
        self.exit(2, f"dev_protocol: {message}\n")


def main(argv: list[str] | None = None) -> int:
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="a LoCoMo JSON file (at least 3 conversations)")
    p.add_argument("--json-out", required=True, help="where to write the JSON report")
    p.add_argument("--profile", default="minilm", choices=locomo.PROFILES)
    names = [v.name for v in dev_protocol.VARIANTS]
    p.add_argument(
        "--variants",
        help=f"comma-separated subset of {','.join(names)} ({dev_protocol.DEFAULT} is always read)",
    )
    args = p.parse_args(argv)
    variants = list(dev_protocol.VARIANTS)
    if args.variants:
        wanted = {n.strip() for n in args.variants.split(",") if n.strip()}
        unknown = sorted(wanted - set(names))
        if unknown:
            p.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(names)}")
        variants = [v for v in variants if v.name in wanted or v.name == dev_protocol.DEFAULT]
    try:
        data = locomo.load(args.input)
    except (OSError, ValueError, KeyError) as exc:
        p.error(f"cannot read {args.input}: {exc}")
    if len(data.conversations) < 3:
        p.error(
            f"{args.input} holds {len(data.conversations)} conversations; leave-one-out needs 3"
        )
    doc = dev_protocol.run(data, variants, profile=args.profile, track=output.track)
    doc["input"] = {"path": args.input, "sha256": data.sha256}
    Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    print(dev_protocol.format_report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
