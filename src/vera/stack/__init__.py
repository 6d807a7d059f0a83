"""`vera up` and its launcher.

- ``supervisor``: `vera up` itself, the whole embedded stack in the foreground, healing its
  children;
- ``launcher``: runs `vera up` as a user does, as a subprocess on free ports, and waits
  until it serves: the one launcher of the end-to-end tests and the benchmarks;
- ``run_files``: where a running stack says where it is (``<data-dir>/run``), read by every
  client command;
- ``ports``: free loopback ports for the children and the launcher.
"""


class StackError(Exception):
    """The stack could not start; the message says what to do."""
