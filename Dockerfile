# One image for every Temper role; docker-compose.yml runs it as `temper worker --roles ROLE`.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Same build setting as the Makefile (GOEXPERIMENT=simd: GoMLX's AVX2 matmul).
RUN make build

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/temper /usr/local/bin/temper
ENV TEMPER_HOME=/var/lib/temper
ENTRYPOINT ["temper"]
CMD ["help"]
