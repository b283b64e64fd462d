# The stateval image: the binary alone on a small Debian base, run as a non-root user.
#
#   docker build -t stateval .
#   docker run --rm -v "$PWD:/work" -w /work stateval run pipeline/ci.toml
#
# Build stage: the Rust toolchain, with a C compiler and make for jemalloc (the
# binary's allocator, compiled from its C sources).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin stateval \
 && cp target/release/stateval /stateval

# Runtime stage: glibc and libgcc from debian-slim, nothing else; the binary links
# nothing more (rustls for HTTPS, its own root certificates).
# bubblewrap isolates external agents and custom graders (docs/security.md); a container
# runtime's default seccomp policy may forbid the user namespaces it needs, and then
# stateval runs them unisolated and says so: `--security-opt seccomp=unconfined` (or a
# policy that allows clone(CLONE_NEWUSER)) lets it isolate them
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 --user-group stateval
COPY --from=build /stateval /usr/local/bin/stateval
USER stateval
WORKDIR /work
ENTRYPOINT ["stateval"]
CMD ["--help"]
