"""What a runtime reads outside the project that decides which ``vera`` server it uses: a
``vera`` server in the user's, the project's local or the organization's managed scope,
and managed policy. Connect looks before it writes anything (a blocking issue is a
conflict, exit 3); a warning is printed and connect goes on."""

from __future__ import annotations

from dataclasses import dataclass

# Stable codes, first in every line connect prints.
SHADOWING_LOCAL_SERVER = "shadowing_local_server"  # a local-scope vera replaces the project's
SHADOWING_MANAGED_SERVER = "shadowing_managed_server"  # a managed vera replaces it
# a user-scope vera with keys the project's does not set, which the runtime merges into it
MERGING_USER_SERVER = "merging_user_server"
OVERRIDDEN_USER_SERVER = "overridden_user_server"  # a user-scope vera the project's replaces
MANAGED_BLOCKS_SERVER = "managed_blocks_server"  # managed policy keeps vera from running
MANAGED_BLOCKS_HOOKS = "managed_blocks_hooks"  # managed policy keeps project hooks off


@dataclass(frozen=True)
class ScopeIssue:
    code: str
    blocking: bool
    detail: str

    def line(self) -> str:
        return f"{'conflict' if self.blocking else 'warning'}: {self.code}: {self.detail}"
