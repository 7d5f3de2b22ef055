# The operator's image for those with a container engine:
#   docker build -t workflow-operator:dev .
# Same image as `make image` (scripts/build-image.sh), which needs no engine: a statically
# linked binary (x86_64-unknown-linux-musl) at /usr/local/bin/workflow-operator, default
# arguments `run`, user 65532:65532 (nonroot), no shell.

FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
ENV CC_x86_64_unknown_linux_musl=musl-gcc
RUN cargo build --release -p workflow-operator --bin workflow-operator \
      --target x86_64-unknown-linux-musl \
 && install -D -m 0755 target/x86_64-unknown-linux-musl/release/workflow-operator \
      /out/usr/local/bin/workflow-operator

# distroless/static: /etc/passwd with nonroot (65532), /tmp, CA certificates; no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/workflow-operator"]
CMD ["run"]
