#!/bin/sh
# scrapyd reads ~/.scrapyd.conf after /etc/scrapyd/scrapyd.conf: the login goes
# there from the environment, so no image or file in the repository holds it.
# Only with a login does scrapyd listen beyond loopback.
set -eu
: "${SCRAPYD_USERNAME:?set SCRAPYD_USERNAME}"
: "${SCRAPYD_PASSWORD:?set SCRAPYD_PASSWORD}"
umask 077
printf '[scrapyd]\nbind_address = 0.0.0.0\nusername = %s\npassword = %s\n' \
  "$SCRAPYD_USERNAME" "$SCRAPYD_PASSWORD" > "$HOME/.scrapyd.conf"
# A node in a container fetches the public web only (docs/security.md).
DENY_PRIVATE_NETWORKS="${DENY_PRIVATE_NETWORKS:-True}"
export DENY_PRIVATE_NETWORKS
exec "$@"
