/* telemetry_watch: prints the local rowand's paths, then every change.
 *
 *   telemetry_watch [-s SOCKET | -S SITE] [-n UPDATES] [-i INTERVAL_MS]
 *
 * Uses the subscription's pollable fd (an application would add it to its
 * own event loop). Exit 0 after UPDATES updates, 69 when no daemon answers. */
#include <poll.h>
#include <rowan/rowan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* state_name(rowan_peer_state s) {
  switch (s) {
    case ROWAN_PEER_UP:
      return "up";
    case ROWAN_PEER_WAITING:
      return "waiting";
    case ROWAN_PEER_DOWN:
      return "down";
    default:
      return "unknown";
  }
}

static const char* mode_name(rowan_route_mode m) {
  switch (m) {
    case ROWAN_MODE_DIRECT:
      return "direct";
    case ROWAN_MODE_PASSTHROUGH:
      return "passthrough";
    case ROWAN_MODE_SPLIT:
      return "split";
    default:
      return "unknown";
  }
}

static void print_paths(const rowan_telemetry* t) {
  size_t i;
  for (i = 0; i < rowan_telemetry_peer_count(t); ++i) {
    rowan_path_info p;
    if (rowan_telemetry_peer(t, i, &p) != ROWAN_OK) continue;
    printf(
        "peer=%s state=%s mode=%s min_rtt_ms=%.3f srtt_ms=%.3f btlbw_mbps=%.1f "
        "bdp_bytes=%llu loss=%.5f retx=%.5f cc=%s\n",
        p.peer, state_name(p.state), mode_name(p.mode), p.min_rtt_s * 1e3, p.srtt_s * 1e3,
        p.btlbw_bps / 1e6, (unsigned long long)p.bdp_bytes, p.loss_rate, p.retransmit_rate, p.cc);
  }
  for (i = 0; i < rowan_telemetry_route_count(t); ++i) {
    rowan_route_info r;
    if (rowan_telemetry_route(t, i, &r) == ROWAN_OK)
      printf("route=%s peer=%s mode=%s\n", r.prefix, r.peer, mode_name(r.mode));
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  const char* socket_path = NULL;
  const char* site = NULL;
  long updates = 3;
  long interval = 500;
  int i;
  int rc;
  rowan_telemetry* t = NULL;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-s") == 0)
      socket_path = argv[i + 1];
    else if (strcmp(argv[i], "-S") == 0)
      site = argv[i + 1];
    else if (strcmp(argv[i], "-n") == 0)
      updates = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "-i") == 0)
      interval = strtol(argv[i + 1], NULL, 10);
  }
  rc = site != NULL ? rowan_telemetry_open_site(site, &t) : rowan_telemetry_open(socket_path, &t);
  if (rc != ROWAN_OK) {
    fprintf(stderr, "telemetry_watch: %s (%s)\n", rowan_strerror(rc), rowan_last_error());
    return 64;
  }
  rc = rowan_telemetry_refresh(t, 2000);
  if (rc != ROWAN_OK) {
    fprintf(stderr, "telemetry_watch: %s (%s)\n", rowan_strerror(rc), rowan_last_error());
    rowan_telemetry_close(t);
    return 69;
  }
  printf("snapshot\n");
  print_paths(t);
  if (updates > 0 && rowan_telemetry_subscribe(t, (uint32_t)interval, NULL, NULL) == ROWAN_OK) {
    long seen = 0;
    while (seen < updates) {
      struct pollfd pfd;
      pfd.fd = rowan_telemetry_fd(t);
      pfd.events = POLLIN;
      pfd.revents = 0;
      if (poll(&pfd, 1, 10000) <= 0) break;
      seen += (long)rowan_telemetry_consume(t);
      printf("update %ld\n", seen);
      print_paths(t);
    }
  }
  rowan_telemetry_close(t);
  return 0;
}
