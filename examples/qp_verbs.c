/* qp_verbs: applies librowan's WAN-sized attributes to real RC QPs.
 *
 *   qp_verbs [-d DEVICE] [-g GID_INDEX] --rtt SECONDS --rate BITS_PER_S --mode MODE
 *
 * Opens DEVICE (default: the first RDMA device, e.g. soft-RoCE rxe0), creates
 * two RC QPs with the computed queue depths, brings them up connected to each
 * other (INIT -> RTR -> RTS through rowan_qp_modify), reads back the attributes
 * with ibv_query_qp, and moves one RDMA WRITE between them. Prints key=value
 * lines; exit 0 only when the device holds exactly the (clamped) attributes
 * and the WRITE completed. */
#include <infiniband/verbs.h>
#include <rowan/rowan_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what) {
  fprintf(stderr, "qp_verbs: %s failed\n", what);
  return 1;
}

int main(int argc, char** argv) {
  const char* dev_name = NULL;
  int gid_index = 1;
  rowan_qp_path path;
  rowan_qp_attrs attrs;
  struct ibv_device** list;
  struct ibv_context* ctx = NULL;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp[2];
  struct ibv_qp_init_attr init;
  union ibv_gid gid;
  static char buf[2][4096];
  struct ibv_mr* mr;
  int i, n = 0, rc = 0;

  memset(&path, 0, sizeof path);
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-d") == 0)
      dev_name = argv[i + 1];
    else if (strcmp(argv[i], "-g") == 0)
      gid_index = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rtt") == 0)
      path.rtt_s = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--rate") == 0)
      path.rate_bps = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--mode") == 0)
      path.mode = strcmp(argv[i + 1], "passthrough") == 0 ? ROWAN_MODE_PASSTHROUGH
                  : strcmp(argv[i + 1], "split") == 0     ? ROWAN_MODE_SPLIT
                                                          : ROWAN_MODE_DIRECT;
  }
  if (rowan_qp_attrs_compute(&path, &attrs) != ROWAN_OK) return fail("rowan_qp_attrs_compute");

  list = ibv_get_device_list(&n);
  for (i = 0; list != NULL && i < n; ++i) {
    if (dev_name == NULL || strcmp(ibv_get_device_name(list[i]), dev_name) == 0) {
      ctx = ibv_open_device(list[i]);
      break;
    }
  }
  if (ctx == NULL) return fail("opening the RDMA device");
  if (rowan_qp_attrs_clamp(ctx, 1, &attrs) != ROWAN_OK) return fail("rowan_qp_attrs_clamp");
  pd = ibv_alloc_pd(ctx);
  cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
  mr = pd ? ibv_reg_mr(pd, buf, sizeof buf,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
          : NULL;
  if (cq == NULL || mr == NULL) return fail("pd/cq/mr");
  if (ibv_query_gid(ctx, 1, gid_index, &gid) != 0) return fail("ibv_query_gid");

  for (i = 0; i < 2; ++i) {
    memset(&init, 0, sizeof init);
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    rowan_qp_init_attr_apply(&attrs, &init);
    qp[i] = ibv_create_qp(pd, &init);
    if (qp[i] == NULL) return fail("ibv_create_qp");
  }
  for (i = 0; i < 2; ++i) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(qp[i], &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
      return fail("INIT");
    memset(&a, 0, sizeof a);
    a.dest_qp_num = qp[1 - i]->qp_num;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    if (rowan_qp_modify(qp[i], &attrs, IBV_QPS_RTR, &a,
                        IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) != ROWAN_OK)
      return fail("RTR with rowan_qp_modify");
    memset(&a, 0, sizeof a);
    if (rowan_qp_modify(qp[i], &attrs, IBV_QPS_RTS, &a, IBV_QP_SQ_PSN) != ROWAN_OK)
      return fail("RTS with rowan_qp_modify");
  }
  for (i = 0; i < 2; ++i) {
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;
    if (ibv_query_qp(qp[i], &q,
                     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MTU |
                         IBV_QP_MIN_RNR_TIMER | IBV_QP_CAP,
                     &qi) != 0)
      return fail("ibv_query_qp");
    printf(
        "qp=%u timeout=%u retry_cnt=%u rnr_retry=%u max_rd_atomic=%u max_dest_rd_atomic=%u "
        "path_mtu=%u min_rnr_timer=%u max_send_wr=%u\n",
        qp[i]->qp_num, (unsigned)q.timeout, (unsigned)q.retry_cnt, (unsigned)q.rnr_retry,
        (unsigned)q.max_rd_atomic, (unsigned)q.max_dest_rd_atomic, (unsigned)q.path_mtu,
        (unsigned)q.min_rnr_timer, (unsigned)qi.cap.max_send_wr);
    if (q.timeout != attrs.timeout || q.retry_cnt != attrs.retry_cnt ||
        q.rnr_retry != attrs.rnr_retry || q.max_rd_atomic != attrs.max_rd_atomic ||
        q.max_dest_rd_atomic != attrs.max_dest_rd_atomic || q.path_mtu != attrs.path_mtu ||
        q.min_rnr_timer != attrs.min_rnr_timer || qi.cap.max_send_wr < attrs.max_send_wr) {
      fprintf(stderr, "qp_verbs: the QP does not hold the attributes (want timeout=%u ...)\n",
              (unsigned)attrs.timeout);
      rc = 1;
    }
  }
  {
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad = NULL;
    struct ibv_wc wc;
    int polls = 0, got = 0;
    strcpy(buf[0], "rowan");
    sge.addr = (uintptr_t)buf[0];
    sge.length = 6;
    sge.lkey = mr->lkey;
    memset(&wr, 0, sizeof wr);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)buf[1];
    wr.wr.rdma.rkey = mr->rkey;
    if (ibv_post_send(qp[0], &wr, &bad) != 0) return fail("ibv_post_send");
    while (got == 0 && polls++ < 5000000) got = ibv_poll_cq(cq, 1, &wc);
    if (got != 1 || wc.status != IBV_WC_SUCCESS || strcmp(buf[1], "rowan") != 0) {
      fprintf(stderr, "qp_verbs: RDMA WRITE failed (%s)\n",
              got == 1 ? ibv_wc_status_str(wc.status) : "no completion");
      rc = 1;
    } else {
      printf("write=ok\n");
    }
  }
  ibv_destroy_qp(qp[0]);
  ibv_destroy_qp(qp[1]);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return rc;
}
