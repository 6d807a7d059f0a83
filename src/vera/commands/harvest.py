"""`vera harvest PATH --project P`: what a repository's files state, loaded into a project
with line-exact evidence, and kept current as the repository changes (docs/harvest.md).

The checkout's commit is harvested on this machine (``vera.harvest``: git's object
database, maintained parsers, no model, no network), then compared with the last harvest
of the same repository into the same project (``vera.harvest.changes``): new facts are
added, unchanged ones deduplicated, changed ones corrected and vanished ones closed at the
commit's time. The records travel through the REST API's ingest route in batches within
its bounds (``vera.commands.ingest``), as the calling curator, with a progress bar; a run
interrupted half-way is finished by running it again (ingest is idempotent).

Without ``--publish`` the facts are filed as proposals for the project's curators
(``POST /projects/{project}/proposals``, open to the project's members; each keeps its
citation through verification; a predicate the deployment's ontology lacks is named and
its facts left out). ``--publish`` publishes them as curated truth at ``--trust-tier``
(curators only), kept current as described above.
``--since COMMIT`` walks the first-parent history after COMMIT up to the revision, one
harvest per commit, so a new project is filled from its past. ``--check`` compares every
harvested fact's cited lines with the revision and reports drift; it writes nothing.

The API and the API key are found as for `vera ingest` (``vera.api_client``): the running
stack of the data dir, or ``--api-url`` with ``VERA_API_KEY``. Exit codes: 0 done, 1 the
API could not be reached, 2 refused (or, with ``--check``, drift found: 3).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vera.api_client import (
    EXIT_OK,
    EXIT_REFUSED,
    ApiClient,
    ApiRefused,
    ClientStop,
    add_connection_arguments,
    open_client,
)
from vera.commands import Subcommands, settings_at
from vera.config import Settings
from vera.ingest_records import IngestFileError

EXIT_DRIFT = 3
PROGRESS_FROM = 200


def add_parser(commands: Subcommands) -> None:
    harvest = commands.add_parser(
        "harvest", help="state what a git checkout's files state, with line-exact evidence")
    harvest.add_argument("path", type=Path, help="a git checkout")
    harvest.add_argument("--project", required=True, help="project slug")
    harvest.add_argument("--revision", default="HEAD", help="the commit to harvest (HEAD)")
    harvest.add_argument("--since", metavar="COMMIT",
                         help="harvest every first-parent commit after COMMIT up to --revision")
    harvest.add_argument("--repository", help="the repository's canonical identity when no "
                         "remote names it (for example github.com/acme/payments)")
    harvest.add_argument("--publish", action="store_true",
                         help="publish as curated facts (curators only)")
    harvest.add_argument("--trust-tier", type=int, choices=range(5), metavar="0-4",
                         help="with --publish: the trust tier of the facts (default: the "
                              "curated tier)")
    harvest.add_argument("--check", action="store_true",
                         help="report harvested facts whose cited lines changed at --revision "
                              "(those of the last harvest, or with --since those stated at "
                              "that commit, without an API); write nothing; exit 3 on drift")
    add_connection_arguments(harvest)
    harvest.add_argument("--json", action="store_true", help="print the summary as JSON")


@dataclass
class Report:
    """What one run did, per harvested commit."""

    repository: str = ""
    commits: list[dict[str, Any]] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    drift_marks: dict[str, int] = field(default_factory=dict)


def run(args: argparse.Namespace, settings: Settings, transport: Any = None) -> int:
    from vera.harvest.git import GitError

    if args.trust_tier is not None and not args.publish:
        print("vera harvest: --trust-tier: only with --publish", file=sys.stderr)
        return EXIT_REFUSED
    try:
        if args.check and args.since:
            report = _check_against(args)
        else:
            with open_client(args, settings, transport) as api:
                report = _harvest(args, settings, api)
    except GitError as exc:
        print(f"vera harvest: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except IngestFileError as exc:
        print("vera harvest: the API refused a record:", file=sys.stderr)
        for index, reason in exc.errors:
            print(f"  record {index}: {reason}", file=sys.stderr)
        return EXIT_REFUSED
    except ClientStop as stop:
        print(f"vera harvest: {stop.message}", file=sys.stderr)
        return stop.exit_code
    except ApiRefused as refused:
        print(f"vera harvest: project {args.project}: {refused.describe()}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(report.__dict__, indent=2, default=str))
    else:
        _print(report, args)
    if args.check and report.drift:
        return EXIT_DRIFT
    return EXIT_OK


def _harvest(args: argparse.Namespace, settings: Settings, api: ApiClient) -> Report:
    from tqdm import tqdm

    from vera.harvest import changes
    from vera.harvest.git import Checkout
    from vera.harvest.harvester import harvest_checkout
    from vera.harvest.loading import load_harvest, propose_harvest

    checkout = Checkout(args.path)
    repository = args.repository or checkout.remote_identity() or ""
    branch = checkout.branch()
    state_file = changes.state_path((args.data_dir or settings.data_dir).expanduser(),
                                    api.base_url, args.project, repository)
    report = Report(repository=repository)
    if args.check:
        from vera.harvest.drift import check

        state = changes.load_state(state_file)
        if not state.commit:
            raise ClientStop(f"--check: no earlier harvest of {repository or args.path} into "
                             f"{args.project} on {api.base_url}; compare with a commit "
                             "instead: --check --since BASE", EXIT_REFUSED)
        report.drift = check(checkout, args.revision, state)
        return report
    revisions = [args.revision]
    if args.since:
        revisions = [c.id for c in checkout.commits_between(args.since, args.revision)]
    bar = tqdm(total=len(revisions), desc="commits", unit="commit", file=sys.stderr,
               disable=len(revisions) < 2)
    try:
        for revision in revisions:
            harvest = harvest_checkout(args.path, revision, args.repository)
            harvest.branch = branch
            if args.publish:
                outcome = load_harvest(api, args.project, harvest, state_file,
                                       trust_tier=args.trust_tier, progress_from=PROGRESS_FROM)
            else:
                outcome = propose_harvest(api, args.project, harvest, PROGRESS_FROM)
            report.commits.append(outcome)
            bar.update(1)
    finally:
        bar.close()
    if args.publish and revisions:
        from vera.harvest.drift import mark_drift

        # Every citation of this repository's files, harvested or hand-written, compared
        # with the harvested commit: stale ones served with a drift warning.
        last = report.commits[-1]["commit"]
        report.drift_marks = mark_drift(api, args.project, checkout, last, repository)
    return report


def _check_against(args: argparse.Namespace) -> Report:
    """``--check --since BASE``: the facts a harvest states at BASE, compared with the
    revision's lines; needs no API and no earlier harvest (a CI job's case)."""
    from vera.harvest.changes import Known, State
    from vera.harvest.drift import check
    from vera.harvest.git import Checkout
    from vera.harvest.harvester import harvest_checkout

    base = harvest_checkout(args.path, args.since, args.repository)
    state = State(commit=base.commit.id, facts=[
        Known(f.path, f.slot, "", {"source": f"{base.repository}/{f.path}",
                                   "locator": f.locator, "evidence": f.evidence,
                                   "subject": f.subject, "predicate": f.predicate,
                                   "object": f.object})
        for f in base.facts])
    return Report(repository=base.repository,
                  drift=check(Checkout(args.path), args.revision, state))


def _print(report: Report, args: argparse.Namespace) -> None:
    if args.check:
        if not report.drift:
            print(f"{report.repository}: every harvested fact's cited lines are unchanged")
        for item in report.drift:
            print(f"  {item['reason']}: {item['source']} {item['locator']} "
                  f"{item['subject']} {item['predicate']} {item['object']}")
        return
    for outcome in report.commits:
        if "proposed" in outcome:
            print(f"{report.repository} @ {outcome['commit'][:12]} proposed to {args.project}: "
                  f"{outcome['files_read']} files read, {outcome['facts']} facts "
                  f"({outcome['proposed']['created']} new proposals, "
                  f"{outcome['proposed']['deduplicated']} already pending or known)")
            if outcome["missing_predicates"]:
                print("  left out, the ontology lacks: "
                      + ", ".join(outcome["missing_predicates"]))
            continue
        plan = outcome["plan"]
        print(f"{report.repository} @ {outcome['commit'][:12]} into {args.project}: "
              f"{outcome['files_read']} files read, {outcome['facts']} facts "
              f"({plan['new']} new, {plan['unchanged']} unchanged, {plan['changed']} "
              f"corrected, {plan['vanished']} closed) in {outcome['seconds']:.1f} s")
        if outcome["skipped"]:
            print("  left out: " + ", ".join(f"{n} {r}" for r, n in
                                             sorted(outcome["skipped"].items())))


def main(args: argparse.Namespace) -> int:
    return run(args, settings_at(args.data_dir))
