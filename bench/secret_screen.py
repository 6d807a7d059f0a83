"""The secret screen's worst case: time per maximum-size proposal, and whether it grows
linearly with the text.

    scripts/bench secret-screen [--rounds N]

Each shape is a text built to make one detector rescan what follows every start (the
shapes that were quadratic before the patterns were made linear: a dotted run before a
scheme, ``token_`` repeated before an assignment, ``eyJ-`` repeated before a JWT's dot).
A proposal is screened as the knowledge service screens it: every field at its published
maximum (``vera.limits``). Linearity is the time per character at the full size over the
time per character at an eighth of it: about 1 when linear, about 8 when quadratic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from bench import record
from vera import limits
from vera.secret_screen import screen

SHAPES: dict[str, Callable[[int], str]] = {
    "dotted scheme run": lambda n: ("a." * n)[:n],
    "token_ repeated": lambda n: ("token_" * n)[:n],
    # The names the old pattern backtracked cubically on (2 s at 2 KiB, minutes at 8 KiB).
    "secret_key_ repeated": lambda n: ("secret_key_" * n)[:n],
    "underscore run": lambda n: ("_" * n)[:n],
    "password repeated": lambda n: ("password" * n)[:n],
    "eyJ- repeated": lambda n: ("eyJ-" * n)[:n],
    "scheme repeated": lambda n: ("a://" * n)[:n],
    "user:pass colons": lambda n: ("a://" + "b:" * n)[:n],
    "spaces after password": lambda n: (" password" + " " * n)[:n],
    "prose": lambda n: ("the billing service stores its token in vault; " * n)[:n],
}


def proposal(shape: Callable[[int], str], scale: float = 1.0) -> list[tuple[str, str]]:
    def size(bound: tuple[int, int]) -> int:
        return max(1, int(bound[1] * scale))

    return [
        ("subject", shape(size(limits.SUBJECT))),
        ("predicate", "uses_database"),
        ("object", shape(size(limits.PREDICATE_OBJECT))),
        ("evidence_text", shape(size(limits.EVIDENCE_TEXT))),
    ]


def seconds(fields: list[tuple[str, str]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        screen(fields)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench secret-screen", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    rows = []
    print(f"{'shape':24s} {'full proposal':>14s} {'per char full/eighth':>22s}")
    for name, shape in SHAPES.items():
        full = proposal(shape)
        eighth = proposal(shape, 1 / 8)
        chars_full = sum(len(v) for _, v in full)
        chars_eighth = sum(len(v) for _, v in eighth)
        t_full = seconds(full, args.rounds)
        t_eighth = seconds(eighth, args.rounds)
        ratio = (t_full / chars_full) / (t_eighth / chars_eighth)
        print(f"{name:24s} {t_full * 1000:11.2f} ms {ratio:21.2f}x")
        rows.append([name, t_full * 1000, ratio])
    record.write("secret-screen", argv or [], [record.table(
        [f"shape at every field's maximum (median of {args.rounds})", "full proposal ms",
         "per char, full / an eighth"], rows, digits=[None, 2, 2])],
        wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
