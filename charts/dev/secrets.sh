#!/usr/bin/env bash
# Prints the development Secrets the chart reads by reference (Tiltfile only; never for a
# shared cluster). The values are generated once into .vera-data/dev-secrets.env.
set -euo pipefail
cd "$(dirname "$0")/../.."
env_file=.vera-data/dev-secrets.env
if [ ! -f "$env_file" ]; then
  mkdir -p .vera-data
  umask 077
  {
    echo "POSTGRES_PASSWORD=$(openssl rand -hex 24)"
    echo "RPC_AUTH_KEY=$(openssl rand -hex 32)"
    echo "MCP_JWT_SECRET=$(openssl rand -hex 32)"
  } > "$env_file"
fi
# Added to env files made before the key existed, once: a key made afresh at each run
# would not verify the copies of the pods made before.
if ! grep -q '^SNAPSHOT_SIGNING_KEY=' "$env_file"; then
  echo "SNAPSHOT_SIGNING_KEY=$(openssl rand -hex 32)" >> "$env_file"
fi
# shellcheck disable=SC1090
source "$env_file"
secret() {  # name key value
  printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\ntype: Opaque\nstringData:\n  %s: "%s"\n---\n' "$1" "$2" "$3"
}
secret vera-database dsn "postgresql://vera:${POSTGRES_PASSWORD}@vera-postgres:5432/vera"
secret vera-postgres password "$POSTGRES_PASSWORD"
secret vera-rpc-auth auth-key "$RPC_AUTH_KEY"
secret vera-mcp-jwt jwt-secret "$MCP_JWT_SECRET"
secret vera-retrieval-snapshot signing-key "$SNAPSHOT_SIGNING_KEY"
