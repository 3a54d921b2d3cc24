/* qp_attrs_remote: the RC QP attributes to use toward a remote site.
 *
 *   qp_attrs_remote [-s SOCKET] REMOTE_HOST_OR_PEER [MESSAGE_BYTES]
 *       from the local rowand's telemetry
 *   qp_attrs_remote --rtt SECONDS --rate BITS_PER_S --mode direct|passthrough|split [MESSAGE_BYTES]
 *       from a path you describe (no daemon needed)
 *
 * Prints the attributes as key=value; an application passes the same struct to
 * rowan_qp_modify()/rowan_cm_apply() from <rowan/rowan_verbs.h>. */
#include <rowan/rowan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_attrs(const rowan_qp_attrs* a) {
  printf(
      "timeout=%u ack_timeout_ms=%.3f retry_cnt=%u rnr_retry=%u min_rnr_timer=%u "
      "max_rd_atomic=%u max_dest_rd_atomic=%u path_mtu=%u max_send_wr=%u max_recv_wr=%u "
      "bdp_bytes=%llu\n",
      (unsigned)a->timeout, a->ack_timeout_s * 1e3, (unsigned)a->retry_cnt, (unsigned)a->rnr_retry,
      (unsigned)a->min_rnr_timer, (unsigned)a->max_rd_atomic, (unsigned)a->max_dest_rd_atomic,
      (unsigned)a->path_mtu_bytes, (unsigned)a->max_send_wr, (unsigned)a->max_recv_wr,
      (unsigned long long)a->bdp_bytes);
}

int main(int argc, char** argv) {
  rowan_qp_attrs attrs;
  int rc;
  if (argc >= 7 && strcmp(argv[1], "--rtt") == 0) {
    rowan_qp_path path;
    memset(&path, 0, sizeof path);
    path.rtt_s = atof(argv[2]);
    path.rate_bps = atof(argv[4]);
    path.mode = strcmp(argv[6], "passthrough") == 0 ? ROWAN_MODE_PASSTHROUGH
                : strcmp(argv[6], "split") == 0     ? ROWAN_MODE_SPLIT
                                                    : ROWAN_MODE_DIRECT;
    path.message_bytes = argc > 7 ? (uint32_t)strtoul(argv[7], NULL, 10) : 0;
    rc = rowan_qp_attrs_compute(&path, &attrs);
  } else {
    const char* socket_path = NULL;
    int arg = 1;
    rowan_telemetry* t = NULL;
    if (argc > 2 && strcmp(argv[1], "-s") == 0) {
      socket_path = argv[2];
      arg = 3;
    }
    if (arg >= argc) {
      fprintf(stderr, "usage: qp_attrs_remote [-s SOCKET] REMOTE [MESSAGE_BYTES]\n");
      return 64;
    }
    rc = rowan_telemetry_open(socket_path, &t);
    if (rc == ROWAN_OK) rc = rowan_telemetry_refresh(t, 2000);
    if (rc == ROWAN_OK)
      rc = rowan_qp_attrs_for(
          t, argv[arg], arg + 1 < argc ? (uint32_t)strtoul(argv[arg + 1], NULL, 10) : 0, 0, &attrs);
    rowan_telemetry_close(t);
  }
  if (rc != ROWAN_OK) {
    fprintf(stderr, "qp_attrs_remote: %s (%s)\n", rowan_strerror(rc), rowan_last_error());
    return rc == ROWAN_ERR_UNREACHABLE ? 69 : 1;
  }
  print_attrs(&attrs);
  return 0;
}
