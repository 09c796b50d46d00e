# The action's image: one static binary in an empty image.
# Build stage: Alpine's Rust links against musl, so the binary is static and
# resolves DNS without glibc's NSS libraries.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev ca-certificates
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release --locked \
 && strip target/release/settings-image \
 && /src/target/release/settings-image --version

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /src/target/release/settings-image /settings-image
# Root on purpose: the runner's file-command files and the workspace belong to
# uid 1001, and a container action has to write the former.
USER 0:0
ENTRYPOINT ["/settings-image", "action"]
