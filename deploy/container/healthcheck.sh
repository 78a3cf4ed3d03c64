#!/bin/bash
# The image's HEALTHCHECK: GET /v2/health/ready on the V2 listener
# (127.0.0.1:$SWITCHYARD_HEALTH_PORT, default 8000); healthy on 200. It
# answers 503 while shutting down. Plain bash (/dev/tcp), so the image
# needs no curl.
port="${SWITCHYARD_HEALTH_PORT:-8000}"
exec 3<>"/dev/tcp/127.0.0.1/${port}" || exit 1
printf 'GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 2 status <&3 || exit 1
case "$status" in
    "HTTP/1."?" 200"*) exit 0 ;;
    *) echo "not ready: ${status%$'\r'}"; exit 1 ;;
esac
