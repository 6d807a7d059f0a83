"""The repository's licence file (``LICENSE``, ``LICENCE``, ``COPYING``, with or without
an extension, at the root): the licence its title or SPDX line names.

Only a title the licence itself carries is recognized (``MIT License``, ``Apache License``
with ``Version 2.0``, ``GNU GENERAL PUBLIC LICENSE`` with its version...) or an
``SPDX-License-Identifier`` line; a file that only contains a licence's body is not
identified by its wording, and yields nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import LICENSE, Document, Fact

_NAMES = re.compile(r"^(LICEN[CS]E|COPYING)([.-][\w.-]+)?$", re.IGNORECASE)
# (title pattern, version pattern on the next lines or None, SPDX id)
_TITLES: tuple[tuple[str, str | None, str], ...] = (
    (r"^MIT License$", None, "MIT"),
    (r"^(The )?Apache License$", r"^Version 2\.0", "Apache-2.0"),
    (r"^Apache License,? Version 2\.0", None, "Apache-2.0"),
    (r"^GNU GENERAL PUBLIC LICENSE$", r"^Version 3", "GPL-3.0"),
    (r"^GNU GENERAL PUBLIC LICENSE$", r"^Version 2", "GPL-2.0"),
    (r"^GNU LESSER GENERAL PUBLIC LICENSE$", r"^Version 3", "LGPL-3.0"),
    (r"^GNU LESSER GENERAL PUBLIC LICENSE$", r"^Version 2\.1", "LGPL-2.1"),
    (r"^GNU AFFERO GENERAL PUBLIC LICENSE$", r"^Version 3", "AGPL-3.0"),
    (r"^Mozilla Public License,? (Version|v\.?) ?2\.0$", None, "MPL-2.0"),
    (r"^BSD 3-Clause License$", None, "BSD-3-Clause"),
    (r"^BSD 2-Clause License$", None, "BSD-2-Clause"),
    (r"^ISC License$", None, "ISC"),
    (r"^The Unlicense$", None, "Unlicense"),
    (r"^Boost Software License - Version 1\.0", None, "BSL-1.0"),
)

PREDICATES = frozenset({"license"})
_SPDX = re.compile(r"SPDX-License-Identifier:\s*(?P<id>[\w.+()\- ]+?)\s*(?:\*/|-->)?$")
HEAD_LINES = 10


def wants(path: str) -> bool:
    return "/" not in path and bool(_NAMES.match(path))


def extract(doc: Document) -> Iterator[Fact]:
    head = [(n, line.strip()) for n, line in enumerate(doc.lines[:HEAD_LINES], start=1)]
    for number, text in head:
        spdx = _SPDX.search(text)
        if spdx:
            yield doc.fact(doc.repository, "license", spdx["id"], number, slot="license",
                           document_type=LICENSE)
            return
    for number, text in head:
        for title, version, spdx_id in _TITLES:
            if not re.match(title, text, re.IGNORECASE):
                continue
            end = number
            if version is not None:
                end = next((n for n, t in head if n > number and t), 0)
                if not end or not re.match(version, head[end - 1][1], re.IGNORECASE):
                    continue
            yield doc.fact(doc.repository, "license", spdx_id, number, end, slot="license",
                           document_type=LICENSE, quote=text)
            return
