"""The tool surface every agent front end shares (MCP server, Hermes provider): the catalog of
tools and their argument schemas, token scopes, and one call path over MemoryStore."""
