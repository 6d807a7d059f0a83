"""LoCoMo: load the data set, normalize evidence, turn each turn into one VERA fact.

The mapping follows ``shared/data/locomo/README.md``: every turn of a conversation is one
fact of that conversation's project (subject = speaker, predicate = ``said``, object = the
turn text, valid from the session's date, source = the session, locator = the ``dia_id``).
Category 5 (adversarial) questions and questions whose evidence names no turn are left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

PREDICATE = "said"
SKIPPED_CATEGORY = 5
# The names the LoCoMo evaluations use for the numeric categories of the released data.
CATEGORY_NAMES = {
    1: "1 multi-hop",
    2: "2 temporal",
    3: "3 open-domain",
    4: "4 single-hop",
    5: "5 adversarial",
}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[\s,;]+")
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_SESSION_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    source_id: str
    valid_from: datetime | None

    @property
    def fact_text(self) -> str:
        """The fact as one string, "subject predicate object" (what the baselines index)."""
        return f"{self.speaker} {PREDICATE} {self.text}"


@dataclass(frozen=True)
class Question:
    sample_id: str
    index: int  # position in the sample's qa list
    question: str
    category: int
    evidence: tuple[str, ...]  # normalized dia_ids that name a turn, in order, no repeats


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    skipped_adversarial: int
    skipped_no_evidence: int
    dropped_evidence: tuple[str, ...]  # raw evidence parts that name no turn

    @property
    def project(self) -> str:
        return project_slug(self.sample_id)


def project_slug(sample_id: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", f"locomo-{sample_id}".lower()).strip("-")
    return slug[:63]


def source_id(sample_id: str, session: int) -> str:
    return f"{sample_id}-session_{session}"


def parse_session_date(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08T13:56:00+00:00."""
    text = " ".join(value.split())
    return datetime.strptime(text, _SESSION_DATE_FORMAT).replace(tzinfo=UTC)


def normalize_dia_id(raw: str) -> str | None:
    """'D30:05' -> 'D30:5'; None for anything that is not D<session>:<turn>."""
    match = _DIA_ID.match(raw.strip())
    if not match:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def normalize_evidence(
    evidence: list[str], known: set[str] | frozenset[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Splits on spaces/commas/semicolons, drops leading zeros, keeps ids naming a turn.

    Returns (kept ids in first-seen order without repeats, dropped raw parts).
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in evidence:
        for part in _EVIDENCE_SPLIT.split(entry or ""):
            if not part:
                continue
            dia_id = normalize_dia_id(part)
            if dia_id is None or dia_id not in known:
                dropped.append(part)
            elif dia_id not in kept:
                kept.append(dia_id)
    return tuple(kept), tuple(dropped)


def _sessions(conversation: dict) -> list[int]:
    numbers = []
    for key, value in conversation.items():
        match = _SESSION_KEY.match(key)
        if match and isinstance(value, list):
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def convert_sample(sample: dict) -> Conversation:
    sample_id = sample["sample_id"]
    conversation = sample["conversation"]
    turns: list[Turn] = []
    for number in _sessions(conversation):
        raw_date = conversation.get(f"session_{number}_date_time")
        valid_from = parse_session_date(raw_date) if raw_date else None
        for turn in conversation[f"session_{number}"]:
            dia_id = normalize_dia_id(turn["dia_id"]) or turn["dia_id"]
            turns.append(Turn(
                dia_id=dia_id, speaker=turn["speaker"], text=turn["text"], session=number,
                source_id=source_id(sample_id, number), valid_from=valid_from,
            ))
    known = frozenset(t.dia_id for t in turns)
    questions: list[Question] = []
    adversarial = no_evidence = 0
    dropped: list[str] = []
    for index, qa in enumerate(sample.get("qa", [])):
        category = int(qa["category"])
        if category == SKIPPED_CATEGORY:
            adversarial += 1
            continue
        evidence, lost = normalize_evidence(qa.get("evidence") or [], known)
        dropped.extend(lost)
        if not evidence:
            no_evidence += 1
            continue
        questions.append(Question(sample_id, index, qa["question"], category, evidence))
    return Conversation(sample_id, tuple(turns), tuple(questions), adversarial, no_evidence,
                        tuple(dropped))


def load(path: Path) -> list[Conversation]:
    with Path(path).open(encoding="utf-8") as handle:
        return [convert_sample(sample) for sample in json.load(handle)]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def to_jsonl_records(conversation: Conversation) -> list[dict]:
    """The `vera ingest` lines: one source per session, one fact per turn."""
    records: list[dict] = []
    seen: set[str] = set()
    for turn in conversation.turns:
        if turn.source_id in seen:
            continue
        seen.add(turn.source_id)
        records.append({
            "type": "source", "id": turn.source_id, "source_type": "conversation",
            "title": f"LoCoMo {conversation.sample_id} session {turn.session}",
            "observed_at": _iso(turn.valid_from),
        })
    for turn in conversation.turns:
        records.append({
            "type": "fact", "subject": turn.speaker, "predicate": PREDICATE,
            "object": turn.text, "source": turn.source_id, "locator": turn.dia_id,
            "valid_from": _iso(turn.valid_from), "document_type": "conversation",
        })
    return [{k: v for k, v in record.items() if v is not None} for record in records]


def write_jsonl(conversation: Conversation, path: Path) -> Path:
    with Path(path).open("w", encoding="utf-8") as handle:
        for record in to_jsonl_records(conversation):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return Path(path)
