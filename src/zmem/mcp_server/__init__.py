"""`zmem mcp`: the agent tools over the Model Context Protocol (official SDK 2.x, the zmem[mcp]
extra), over stdio or streamable HTTP with bearer tokens."""
