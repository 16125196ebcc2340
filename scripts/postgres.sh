#!/usr/bin/env bash
# PostgreSQL for Temper's cluster mode and `make test-long`'s cluster test: installs Debian's
# postgresql package when missing, creates (once) and starts a cluster of its own named $CLUSTER on
# $PGPORT, and a login role allowed to create databases. `temper dev --db URL` then creates its two
# databases (temporal, temporal_visibility) and their schemas with the Temporal server's own tool.
# Prints the URL to pass to --db (also TEMPER_TEST_POSTGRES for the cluster test).
#
#   scripts/postgres.sh [start|stop]     env: PGPORT (default 55432), CLUSTER (default temper),
#                                        PGUSER_NAME / PGUSER_PASSWORD (default temporal / temporal)
set -euo pipefail

action=${1:-start}
port=${PGPORT:-55432}
cluster=${CLUSTER:-temper}
user=${PGUSER_NAME:-temporal}
password=${PGUSER_PASSWORD:-temporal}

if ! command -v pg_createcluster >/dev/null; then
	echo "postgres.sh: installing postgresql (Debian)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)

as_postgres() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

case $action in
stop)
	pg_ctlcluster "$version" "$cluster" stop || true
	exit 0
	;;
start) ;;
*)
	echo "postgres.sh: unknown action $action (start or stop)" >&2
	exit 2
	;;
esac

if ! pg_lsclusters -h | awk -v c="$cluster" '$2 == c' | grep -q .; then
	pg_createcluster --port "$port" "$version" "$cluster" >/dev/null
fi
if ! pg_lsclusters -h | awk -v c="$cluster" '$2 == c && $4 == "online"' | grep -q .; then
	pg_ctlcluster "$version" "$cluster" start
fi
for _ in $(seq 50); do
	as_postgres psql -p "$port" -qAtc 'select 1' >/dev/null 2>&1 && break
	sleep 0.2
done
if [[ $(as_postgres psql -p "$port" -qAtc "select 1 from pg_roles where rolname = '$user'") != 1 ]]; then
	as_postgres psql -p "$port" -qc "create role \"$user\" login createdb password '$password'"
fi
echo "postgres://$user:$password@127.0.0.1:$port/temporal?sslmode=disable"
