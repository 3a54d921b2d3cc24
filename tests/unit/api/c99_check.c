/* Compiled as strict C99 against <rowan/rowan.h> and <rowan/rowan_verbs.h>. */
#include <rowan/rowan.h>
#include <rowan/rowan_verbs.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  rowan_qp_path path;
  rowan_qp_attrs attrs;
  struct ibv_qp_attr qa;
  int mask = 0;
  rowan_channel_options o;
  memset(&path, 0, sizeof path);
  path.rtt_s = 0.02;
  path.rate_bps = 1e9;
  path.mode = ROWAN_MODE_PASSTHROUGH;
  if (rowan_qp_attrs_compute(&path, &attrs) != ROWAN_OK) return 1;
  if (attrs.timeout != 15 || attrs.retry_cnt != 7 || attrs.path_mtu != IBV_MTU_1024) return 2;
  memset(&qa, 0, sizeof qa);
  if (rowan_qp_attrs_to_ibv(&attrs, IBV_QPS_RTS, &qa, &mask) != ROWAN_OK) return 3;
  if (qa.timeout != 15 || (mask & IBV_QP_TIMEOUT) == 0) return 4;
  if (rowan_qp_attrs_to_ibv(&attrs, IBV_QPS_INIT, &qa, &mask) != ROWAN_ERR_INVALID) return 5;
  rowan_channel_options_init(&o);
  if (o.cc != NULL || o.rate_bps != 0) return 6;
  if (strcmp(rowan_strerror(ROWAN_ERR_AGAIN), "try again (queue full)") != 0) return 7;
  printf("librowan %s: timeout %u\n", rowan_version(), (unsigned)attrs.timeout);
  return 0;
}
