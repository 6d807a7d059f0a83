#!/bin/sh
# One PostgreSQL role per VERA service (vera_identity, vera_knowledge, vera_retrieval,
# vera_snapshot), each owning its service's schema and nothing else: a service signs in
# with its own password (the DSN in its own env file) and cannot read another's tables.
# The postgres image runs this once, on a new data directory, with the passwords from
# .vera-data/compose/postgres-roles.env (DB_PASSWORD_<SERVICE>). It is idempotent: on a
# data directory from before per-service roles, run it by hand, and it hands each schema
# and its tables and functions to the service's role (docs/deploy.md):
#   docker compose exec postgres sh /docker-entrypoint-initdb.d/10-vera-roles.sh
# A password never goes on psql's command line (any user of the host reads argv in ps):
# psql reads it from its environment (\getenv), which only its owner may read.
set -e
for service in identity knowledge retrieval snapshot; do
  variable="DB_PASSWORD_$(echo "$service" | tr '[:lower:]' '[:upper:]')"
  [ -n "$(printenv "$variable")" ] || { echo "$variable is not set" >&2; exit 1; }
  psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v role="vera_$service" -v schema="$service" -v password_variable="$variable" <<'SQL'
\getenv password :password_variable
SELECT format('CREATE ROLE %I LOGIN', :'role')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" PASSWORD :'password';
CREATE SCHEMA IF NOT EXISTS :"schema" AUTHORIZATION :"role";
ALTER SCHEMA :"schema" OWNER TO :"role";
-- A table's indexes and sequences go with it.
SELECT format('ALTER TABLE %I.%I OWNER TO %I', n.nspname, c.relname, :'role')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = :'schema' AND c.relkind IN ('r', 'p', 'v', 'm') \gexec
SELECT format('ALTER ROUTINE %s OWNER TO %I', p.oid::regprocedure, :'role')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname = :'schema' \gexec
SQL
done
