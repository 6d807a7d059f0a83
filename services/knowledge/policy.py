"""Proposal policy, enforced before anything is written.

What an agent may propose is decided here, not by instruction text: the predicate must be
on the ontology's allowlist (an unknown one is refused with up to three did-you-mean
candidates), no field may carry a credential (``secrets``) and no field may hide
characters (``vera.text``: bidi controls, zero-width and TAG characters, line separators,
and control characters outside evidence line breaks and tabs). Length bounds, per-task
limits and single-valued conflicts are enforced by ``proposals.make_proposal`` and
``proposals.decide_proposal``. A refusal here raises ``invalid_input`` naming the field; the
caller records it as a ``rejected`` attempt without any of the refused text, so a refused
secret never reaches the database.

Pure code: no gRPC, no asyncpg.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from vera import secret_screen
from vera.errors import InvalidInput
from vera.text import codepoint, first_hidden

from .domain import Ontology, load_ontology, normalize
from .ingest import EVIDENCE_LAYOUT
from .proposals import Proposal

MAX_CANDIDATES = 3
# difflib ratio below which a predicate is not offered as a did-you-mean candidate.
CANDIDATE_CUTOFF = 0.6


@dataclass(frozen=True)
class ProposalPolicy:
    """The ontology's proposal allowlist (its single-valued predicates included)."""

    version: str
    allowed_predicates: frozenset[str]

    def is_allowed(self, predicate: str) -> bool:
        return normalize(predicate) in self.allowed_predicates

    def candidates(self, predicate: str) -> list[str]:
        """Up to three allowed predicates closest to ``predicate``, best first.

        Spaces and hyphens are compared as underscores, so "depends on" offers
        ``depends_on``; nothing is offered when nothing is a plausible match.
        """
        probe = normalize(predicate).replace(" ", "_").replace("-", "_")
        allowed = sorted(self.allowed_predicates)
        return difflib.get_close_matches(probe, allowed, n=MAX_CANDIDATES, cutoff=CANDIDATE_CUTOFF)

    def check(self, proposal: Proposal) -> None:
        """Raises ``invalid_input`` naming the first field the policy refuses."""
        # Screen first: a credential must not be echoed back even as a did-you-mean probe.
        sent = proposal.context_as_sent or proposal.context
        secret_screen.screen(
            (
                ("subject", proposal.subject),
                ("predicate", proposal.predicate),
                ("object", proposal.object),
                ("evidence_text", proposal.evidence_text),
                ("context.session_ref", sent.session_ref),
                ("context.task_ref", sent.task_ref),
                ("context.runtime", sent.runtime),
                ("context.repository_ref", proposal.context.repository_ref),
                ("branch", proposal.location.branch),
                ("code_path", proposal.location.code_path),
            )
        )
        _refuse_hidden(
            (
                ("subject", proposal.subject, ""),
                ("predicate", proposal.predicate, ""),
                ("object", proposal.object, ""),
                ("evidence_text", proposal.evidence_text, EVIDENCE_LAYOUT),
                # Shown to curators beside the fact: a bidi override could make a branch
                # or path read as another.
                ("branch", proposal.location.branch, ""),
                ("code_path", proposal.location.code_path, ""),
            )
        )
        if not self.is_allowed(proposal.predicate):
            raise InvalidInput(
                "predicate",
                "not an allowed predicate",
                reason="unknown_predicate",
                candidates=self.candidates(proposal.predicate),
            )


def _refuse_hidden(fields: Iterable[tuple[str, str, str]]) -> None:
    for name, value, allowed in fields:
        hidden = first_hidden(value, allowed)
        if hidden is not None:
            raise InvalidInput(
                name,
                "contains a hidden or control character",
                reason="hidden_character",
                codepoint=codepoint(hidden),
            )


def policy_from_ontology(raw: dict) -> ProposalPolicy:
    allowed = {normalize(p) for p in raw.get("proposal_predicates", [])}
    allowed |= {normalize(p) for p in raw.get("single_valued_predicates", [])}
    return ProposalPolicy(version=str(raw["version"]), allowed_predicates=frozenset(allowed))


@lru_cache(maxsize=8)
def policy_for(ontology: Ontology) -> ProposalPolicy:
    """The allowlist of the loaded ontology (the operator's file when one is configured),
    the same object the conflict logic reads."""
    return ProposalPolicy(
        version=ontology.version,
        allowed_predicates=ontology.proposal_predicates | ontology.single_valued_predicates,
    )


def load_policy() -> ProposalPolicy:
    """The shipped ontology's allowlist."""
    return policy_for(load_ontology())
