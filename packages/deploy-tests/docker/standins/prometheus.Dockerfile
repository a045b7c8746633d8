# Stand-in for prom/prometheus (test fixture): Debian's prometheus 2.42, laid out as the
# official image is (/bin/prometheus as the entrypoint, /etc/prometheus/prometheus.yml,
# data in /prometheus, user nobody), plus Debian's wget for the health check (the official
# image has busybox's).
FROM duet-standin/debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus wget >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
VOLUME ["/prometheus"]
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
