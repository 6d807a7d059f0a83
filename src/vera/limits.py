"""The published input bounds of the MCP tools (GUIDE §Input Bounds): the contract.

Each bound is declared here once. The gateway advertises it in a tool's JSON Schema and
checks it before the tool runs (``gateway/bounds.py``); the services enforce the same
number on their side of the wire, so a value the schema allows is never refused further
in. Changing a number here changes the published contract: the GUIDE's table must say
the same. Plain constants only, so the gateway and every service may import this module
while it imports neither.

Pairs are inclusive ``(minimum, maximum)``: characters for text, values for numbers.
"""

from __future__ import annotations

QUERY = (1, 8192)
LIMIT = (1, 50)  # every limit the rows below do not name
LIMIT_FEED = (1, 200)  # explore, lineage, changes, conflicts, memory_recent_changes
LIMIT_ENTITY = (1, 500)  # knowledge_get_entity
LIMIT_REPORT = (1, 100)  # knowledge_proposal_report
LIMIT_COMMUNITIES = (1, 100)  # knowledge_search_communities
DEPTH = (1, 5)  # explore
TOKEN_BUDGET = (100, 32000)
SUBJECT = (1, 512)
PREDICATE_OBJECT = (1, 2048)
EVIDENCE_TEXT = (0, 8000)
TASK_CONTEXT_FIELD = (1, 256)  # runtime, session_ref, task_ref, repository_ref
ENTITY = (1, 1024)
REPOSITORY_PATH_CURSOR = (1, 1024)  # repository, code_path, cursor
ID_LIKE = (1, 512)  # project, branch, fact_key, pack_id, snapshot_id, result_ref, usage_ref...
# A source id (a curator's "adr-7", a harvested file's "docs/adr/7.md"): any characters but
# control characters, "/" included, 1..512 of them, as every id. In a URL it is one
# percent-encoded path segment, and the routes taking one read "/" as part of it
# (docs/rest-api.md, "Source ids").
SOURCE_ID = ID_LIKE
SOURCE_ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
TYPE_NAME = (1, 256)  # document_type, source_type
TIMESTAMP = (1, 64)  # as_of, known_as_of
AUTHORITY = (0.0, 1.0)  # min_authority
TRUST_TIER = (0, 4)  # max_trust_tier
PREDICATE_LIST_ITEMS = 64  # include_predicates, exclude_predicates (and legacy signals)
PREDICATE_LIST_ITEM_CHARS = 256
ROOTS_ITEMS = 16  # knowledge_bootstrap roots, one per workspace root
