# syntax=docker/dockerfile:1.7
#
# Static (musl) builds of the operator and of the e2e mock pod, on a distroless static base, as a non-root user.
#
#   docker build -t rollout-operator:latest .                                    # the operator (last stage)
#   docker build --target mock-pod -t rollout-e2e-mock-pod:latest .              # the e2e mock pod
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/rollout-operator:<tag> --push .
#
# Each platform is compiled natively on the Alpine Rust image for that platform (buildx runs a foreign platform
# under QEMU: slow, but no cross toolchain to get wrong). The binaries need no network at run time beyond the
# Kubernetes API and the pods they call: no shell, no package manager, no CA bundle download (TLS to the API server
# uses the service account's CA; the webhook certificate is self-signed).

# The toolchain the workspace is developed and locked with.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS build
# ring compiles C and assembly: the musl C toolchain is all it needs.
RUN apk add --no-cache musl-dev binutils
WORKDIR /src
COPY . .
# Cache the registry and the target directory between builds; copy the binaries out of the cache mount.
# Debug info is dropped from the image (symbol names are kept, so panics still name their functions).
# The build refuses to ship a dynamically linked binary: the static base image has no libc.
ENV CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=debuginfo
# The git revision `--version` and rollout_operator_build_info report: .git is not in the build context, so it is
# passed in (`--build-arg ROLLOUT_OPERATOR_REVISION=$(git rev-parse --short HEAD)`); without it, "unknown".
ARG ROLLOUT_OPERATOR_REVISION=""
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p rollout-operator --bin rollout-operator -p rollout-e2e --bin mock-pod \
 && mkdir -p /out \
 && cp target/release/rollout-operator target/release/mock-pod /out/ \
 && for bin in /out/*; do \
      if readelf -d "$bin" 2>/dev/null | grep -q NEEDED; then echo "$bin is dynamically linked" >&2; exit 1; fi; \
    done

# The mock pod for the e2e suite (readiness toggles, prepare-downscale and delayed-downscale endpoints).
FROM gcr.io/distroless/static-debian12:nonroot AS mock-pod
COPY --from=build /out/mock-pod /mock-pod
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/mock-pod"]

# The operator: last stage, so a plain `docker build .` produces it. The binary is also at the Go image's path,
# /usr/bin/rollout-operator, for deployments that name it in `command:`.
FROM gcr.io/distroless/static-debian12:nonroot AS rollout-operator
COPY --from=build /out/rollout-operator /rollout-operator
COPY --from=build /out/rollout-operator /usr/bin/rollout-operator
USER 65532:65532
EXPOSE 8001 8443
ENTRYPOINT ["/rollout-operator"]
