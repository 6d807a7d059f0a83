"""``scripts/load``: open-loop load against the MCP gateway or one gRPC service alone.

    scripts/load [--service gateway|retrieval|knowledge|identity|snapshot[,...]]
                 [--rate R] [--duration S] [--max-calls N] [--soak S] [--knee]

The modules: ``openloop`` (calls scheduled by time, not by completion, and their
summary), ``seed`` (principals, projects and facts the load reads), ``gateway`` and
``services`` (the call mixes: MCP ``tools/call`` bodies, and each service's main RPCs),
``memory`` (RSS of every process of the stack over the run), ``knee`` (rate steps
against the unloaded p95), ``__main__`` (where the stack comes from, and the report).
"""
