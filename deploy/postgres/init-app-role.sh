#!/bin/sh
# Run once by the postgres image's entrypoint on an empty data directory (docker-entrypoint-initdb.d).
# Creates the role ragmon's processes connect as (no superuser, no CREATEDB, no CREATEROLE), owning
# database `ragmon`; the superuser POSTGRES_USER is used for nothing else. The password comes from the
# environment and reaches psql on stdin (a here-document), never on a command line.
set -eu
# compose passes the password in the environment, Kubernetes as a file (a mounted Secret)
if [ -n "${RAGMON_DB_PASSWORD_FILE:-}" ]; then RAGMON_DB_PASSWORD=$(cat "$RAGMON_DB_PASSWORD_FILE"); fi
: "${RAGMON_DB_PASSWORD:?RAGMON_DB_PASSWORD (or RAGMON_DB_PASSWORD_FILE) must be set}"
case "$RAGMON_DB_PASSWORD" in *"'"*) echo "RAGMON_DB_PASSWORD must not contain a single quote" >&2; exit 1;; esac
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE rgm_app WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
    PASSWORD '${RAGMON_DB_PASSWORD}';
CREATE DATABASE ragmon OWNER rgm_app;
REVOKE ALL ON DATABASE postgres FROM PUBLIC;
SQL
