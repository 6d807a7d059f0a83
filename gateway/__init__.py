"""The MCP gateway: stateless, owns auth, the guard, the tool surface and metrics."""
