# volley in a small runtime image: built in the Rust image, run in Debian
# slim with only CA certificates added (for https:// and wss:// targets).
#   docker build -t volley .
#   docker run --rm --network host volley run --target http://127.0.0.1:8545 --method eth_chainId
FROM rust:1-bookworm AS build
WORKDIR /src
# Dependencies first, so that a source change rebuilds only volley.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src benches && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/hot_path.rs \
    && cargo build --release --locked \
    && rm -rf src benches
COPY build.rs ./
COPY src ./src
COPY benches ./benches
# The image has no .git (.dockerignore): the commit `volley --version`
# names comes from here (`--build-arg VOLLEY_COMMIT=$(git rev-parse --short HEAD)`).
ARG VOLLEY_COMMIT=unknown
RUN touch src/main.rs src/lib.rs && VOLLEY_COMMIT="$VOLLEY_COMMIT" cargo build --release --locked --bin volley \
    && strip target/release/volley

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --create-home volley
COPY --from=build /src/target/release/volley /usr/local/bin/volley
COPY scenarios /home/volley/scenarios
USER volley
WORKDIR /home/volley
ENTRYPOINT ["volley"]
CMD ["--help"]
