"""The plugin's MCP server while ZMem is not installed yet (the first session after a
marketplace install, before bootstrap.py has made the plugin's venv): a stdio MCP server with
no tools that answers the handshake and says why. A server that failed to start instead is
remembered by Claude Code as one that needs authentication and skipped in later sessions, so the
real server, ready by then, would never be started. Standard library only."""

import json
import sys

NOTE = "ZMem is still being installed (its first run); its tools appear in the next session."


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion") or "2025-06-18",
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "zmem", "version": "installing"},
            "instructions": NOTE,
        }
    if method == "tools/list":
        return {"tools": []}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg:
            continue  # a notification: nothing to answer
        result = answer(msg)
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": f"{NOTE} ({msg.get('method')})"}
        else:
            reply["result"] = result
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
