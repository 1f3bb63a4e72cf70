#!/bin/sh
# The official redis image's entrypoint contract (docker-library/redis), for the Debian stand-in:
# `docker-entrypoint.sh -opt ...` or `docker-entrypoint.sh x.conf ...` means redis-server; run as
# root, redis-server gets the working directory (/data) and is exec'd as the redis user; the
# server's files are private (umask 0077).
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
    set -- redis-server "$@"
fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    find . \! -user redis -exec chown redis '{}' +
    exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi
umask 0077
exec "$@"
