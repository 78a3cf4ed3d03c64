#!/bin/sh
# Build-stage wrapper: runs a command trusting an extra CA bundle when the
# build was given one as the secret `ca-bundle` (for networks whose TLS
# goes through an inspecting proxy), e.g.
#   podman build --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt ...
# Without the secret the command runs unchanged. A secret never ends up in
# an image layer.
if [ -s /run/secrets/ca-bundle ]; then
    export SSL_CERT_FILE=/run/secrets/ca-bundle PIP_CERT=/run/secrets/ca-bundle \
        CARGO_HTTP_CAINFO=/run/secrets/ca-bundle REQUESTS_CA_BUNDLE=/run/secrets/ca-bundle
fi
exec "$@"
