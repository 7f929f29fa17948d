#!/bin/bash
# Runs once, on the first start of an empty postgres volume (docker-entrypoint-initdb.d).
# The image creates POSTGRES_DB (MLflow's database); this adds Prefect's database.
set -euo pipefail

PREFECT_DB="${PREFECT_DB:-prefect}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v db="$PREFECT_DB" -v owner="$POSTGRES_USER" <<-'EOSQL'
	SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'owner')
	WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')\gexec
EOSQL
