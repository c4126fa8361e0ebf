# attnd: multi-head attention inference service. Classroom demo:
#   docker run --rm -p 8080:8080 <image>     then open http://localhost:8080/
#
# Build stage: compile with the Makefile on Debian 12.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make libc6-dev libopenblas-dev \
      libmicrohttpd-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY attention/ attention/
COPY api/ api/
COPY server/ server/
COPY web/ web/
RUN make WERROR=1 BUILD=/out /out/attnd && strip /out/attnd

# Runtime stage: the runtime libraries (OpenBLAS, libmicrohttpd, zlib) and the binary, which
# carries the web page built in.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libopenblas0-pthread libmicrohttpd12 zlib1g \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/apt \
      /var/log/dpkg.log /usr/share/doc/* /usr/share/man/* \
 && useradd --system --no-create-home --uid 10001 --shell /usr/sbin/nologin attnd \
 && mkdir -p /models
COPY --from=build /out/attnd /usr/local/bin/attnd
USER 10001:10001
ENV ATTND_LISTEN=0.0.0.0:8080 \
    ATTND_MODELS=/models
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/attnd", "--health-check"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/attnd"]
