"""VERA: verified organizational memory for coding agents."""

SERVER_VERSION = "0.2.1"
INTEGRATION_CONTRACT_VERSION = 1
