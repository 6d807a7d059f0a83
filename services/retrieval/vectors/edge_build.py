"""Builds the HNSW graph of a qdrant-edge shard's copy, in a process of its own:

    python -m vera.services.retrieval.vectors.edge_build <shard copy> <dimensions>

edge.py starts it. qdrant-edge holds the GIL for a whole optimization, so a build in
the serving process froze every coroutine of it (seconds per 20k-point segment, minutes
for a merge); here it only takes CPU, at a lower priority than the serving process's.
Prints ``optimized`` or ``unchanged``; exits non-zero when the build failed.
"""

from __future__ import annotations

import os
import sys

import qdrant_edge as edge

from vera.services.retrieval.vectors.edge import shard_config

# The serving process (queries, embedding) comes first on a shared machine.
BUILD_NICENESS = 10


def build(path: str, dimensions: int) -> bool:
    shard = edge.EdgeShard.load(path, shard_config(dimensions))
    try:
        return bool(shard.optimize())
    finally:
        shard.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print(
            "usage: python -m vera.services.retrieval.vectors.edge_build PATH DIMENSIONS",
            file=sys.stderr,
        )
        return 2
    os.nice(BUILD_NICENESS)
    print("optimized" if build(argv[0], int(argv[1])) else "unchanged", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
