# The action's image: one static binary and a CA bundle in an empty image.
# Nothing is compiled here: `bash scripts/action-image.sh [RUST_TARGET...]`
# first builds the binary (the gnu target with crt-static, release profile,
# stripped) into target/action-image/<arch>/ next to the CA bundle, and the
# repository root is the build context (.dockerignore keeps only that
# folder). So `docker build .`, BuildKit for several platforms, and
# `buildah bud` all build it offline. A static glibc resolves names without
# NSS modules: glibc (2.34 on) has its files and dns sources built in, so
# /etc/hosts and /etc/resolv.conf, which the runtime provides, are enough.
FROM scratch
# Set by BuildKit and buildah for the platform being built (amd64, arm64).
ARG TARGETARCH
COPY target/action-image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY target/action-image/${TARGETARCH}/settings-image /settings-image
# Root on purpose: the runner's file-command files and the workspace belong to
# uid 1001, and a container action has to write the former.
USER 0:0
ENTRYPOINT ["/settings-image", "action"]
